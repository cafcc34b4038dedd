// tracetorchd --tensorboard-dir DIR: every session's per-step history as TensorBoard event files,
// written as it arrives, one run per session: DIR/<session id>/events.out.tfevents.... (tags as
// report/tensorboard/trace_events.h). A layer's step is written once a later step of that layer
// has a point (its forward and backward are in by then), and the rest when the session has ended,
// with each layer's NaN/Inf counts and the anomalies (text) at the last step.
//
// No thread of its own: Export() is called by the daemon's housekeeping thread every snapshot
// interval and once more at shutdown. It reads sessions the way a viewer does (a snapshot under
// the session's lock), so it never blocks ingest for longer than that copy.
//
// Losses, counted (stats()): steps the session's history had already thinned away before they
// could be written (more than history_steps / 2 steps of one layer within one interval), and
// write errors (the session's run is then given up: a later call does not retry it, so a full disk
// does not cost a write per interval).
//
// Thread-safe (one Export() at a time; stats() from any thread).
#ifndef TRACETORCH_DAEMON_CORE_TENSORBOARD_EXPORT_H_
#define TRACETORCH_DAEMON_CORE_TENSORBOARD_EXPORT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/session_manager.h"
#include "report/tensorboard/event_file.h"

namespace tracetorch::daemon {

struct TensorBoardExportStats {
  uint64_t runs = 0;           // Sessions given an event file.
  uint64_t scalars = 0;        // Scalars written.
  uint64_t skipped_steps = 0;  // Steps thinned away before they were written (per layer).
  uint64_t errors = 0;         // Runs given up on a write error.
};

class TensorBoardExporter {
 public:
  explicit TensorBoardExporter(std::string dir) : dir_(std::move(dir)) {}

  // Writes what is new in every session `manager` holds in memory (see above).
  void Export(const SessionManager& manager) ABSL_LOCKS_EXCLUDED(mu_);

  TensorBoardExportStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Run {
    std::unique_ptr<tensorboard::EventFileWriter> writer;
    absl::flat_hash_map<std::string, uint64_t> next_step;  // By layer: the first step not written.
    uint64_t version = 0;                                  // Session::version() at the last export.
    bool done = false;                                     // Ended and written, or given up.
  };

  // Exports one session; false when it failed (counted, run given up).
  bool ExportSession(const std::string& id, const Session& session, Run* run)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Run> runs_ ABSL_GUARDED_BY(mu_);
  TensorBoardExportStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_TENSORBOARD_EXPORT_H_
