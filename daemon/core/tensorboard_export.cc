#include "daemon/core/tensorboard_export.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "report/tensorboard/trace_events.h"
#include "spdlog/spdlog.h"
#include "trace/step_history.h"

namespace tracetorch::daemon {

void TensorBoardExporter::Export(const SessionManager& manager) {
  absl::MutexLock lock(&mu_);
  absl::flat_hash_set<std::string> listed;
  for (const protocol::SessionInfo& info : manager.List()) {
    listed.insert(info.session_id);
    Run& run = runs_[info.session_id];
    if (run.done) continue;
    absl::StatusOr<SessionManager::Found> found = manager.Find(info.session_id);
    if (!found.ok() || found->session == nullptr) {
      run.done = true;  // Evicted (or restored from disk): no history to export.
      run.writer.reset();
      continue;
    }
    if (!ExportSession(info.session_id, *found->session, &run)) {
      run.done = true;
      run.writer.reset();
      ++stats_.errors;
    }
  }
  // Forget the sessions the manager no longer lists.
  for (auto it = runs_.begin(); it != runs_.end();) {
    if (listed.contains(it->first)) {
      ++it;
    } else {
      runs_.erase(it++);
    }
  }
}

bool TensorBoardExporter::ExportSession(const std::string& id, const Session& session, Run* run) {
  const uint64_t version = session.version();
  const bool ended = session.state() != SessionState::kLive;
  if (version == run->version && !ended) return true;  // Nothing new.
  const protocol::Snapshot snapshot = session.ToSnapshot();
  const StepHistory& history = snapshot.history;
  if (run->writer == nullptr) {
    if (history.empty() && !ended) return true;  // No step yet: no file yet.
    absl::StatusOr<std::unique_ptr<tensorboard::EventFileWriter>> writer =
        tensorboard::EventFileWriter::Create(dir_ + "/" + id, {.suffix = "tracetorchd"});
    if (!writer.ok()) {
      spdlog::warn("tensorboard export of session {}: {}", id, writer.status().ToString());
      return false;
    }
    run->writer = *std::move(writer);
    ++stats_.runs;
  }
  int64_t last = 0;
  for (const LayerSteps& layer : history.layers) {
    if (layer.steps.empty()) continue;
    last = std::max(last, static_cast<int64_t>(layer.steps.back()));
    uint64_t& next = run->next_step[layer.full_name];
    const size_t begin = static_cast<size_t>(
        std::lower_bound(layer.steps.begin(), layer.steps.end(), next) - layer.steps.begin());
    // A live session's newest point may still change (its backward is not in yet).
    const size_t end = ended ? layer.steps.size() : layer.steps.size() - 1;
    if (begin >= end) continue;
    // Steps missing from the points about to be written were thinned away unwritten (counted
    // from the gaps in the step numbers).
    const uint64_t from = next > 0 ? next : layer.steps[begin];
    const uint64_t span = layer.steps[end - 1] - from + 1;
    if (span > end - begin) stats_.skipped_steps += span - (end - begin);
    absl::StatusOr<uint64_t> n = tensorboard::WriteLayerSteps(layer, begin, end, run->writer.get());
    if (!n.ok()) {
      spdlog::warn("tensorboard export of session {}: {}", id, n.status().ToString());
      return false;
    }
    stats_.scalars += *n;
    next = layer.steps[end - 1] + 1;
  }
  if (ended) {
    absl::StatusOr<uint64_t> n =
        tensorboard::WriteFinalEvents(snapshot.record, last, run->writer.get());
    absl::Status closed = n.ok() ? run->writer->Close() : n.status();
    if (!closed.ok()) {
      spdlog::warn("tensorboard export of session {}: {}", id, closed.ToString());
      return false;
    }
    stats_.scalars += *n;
    run->writer.reset();
    run->done = true;
    return true;
  }
  if (absl::Status s = run->writer->Flush(); !s.ok()) {
    spdlog::warn("tensorboard export of session {}: {}", id, s.ToString());
    return false;
  }
  run->version = version;
  return true;
}

TensorBoardExportStats TensorBoardExporter::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace tracetorch::daemon
