#include "daemon/core/watch_feed.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/job.h"
#include "daemon/core/watch_delta.h"
#include "protocol/session_info_proto.h"

namespace tracetorch::daemon {

uint64_t SessionFeed::Version(uint64_t pass) {
  if (pass_ != pass) {
    version_ = session_->version();
    pass_ = pass;
  }
  return version_;
}

const Session::WatchView& SessionFeed::Refresh(uint64_t pass) {
  Version(pass);
  if (view_ == nullptr || view_->version != version_) {
    auto fresh = std::make_shared<Session::WatchView>(session_->GetWatchView());
    version_ = fresh->version;  // May be newer than what Version() read.
    auto full = std::make_shared<v1::Snapshot>();
    protocol::ToProto(fresh->snapshot, full.get());
    fresh->snapshot = {};  // Its wire form is what viewers are sent; the versions stay.
    full_bytes_ = full->ByteSizeLong();
    full_ = std::move(full);
    view_ = std::move(fresh);
    deltas_.clear();
  }
  return *view_;
}

std::shared_ptr<const v1::Snapshot> SessionFeed::Delta(uint64_t base) {
  auto [it, inserted] = deltas_.try_emplace(base);
  if (!inserted) return it->second;
  std::optional<v1::Snapshot> d = BuildWatchDelta(*view_, *full_, base);
  if (d.has_value() && d->ByteSizeLong() < full_bytes_) {
    it->second = std::make_shared<const v1::Snapshot>(*std::move(d));
  }
  return it->second;
}

JobSummary SummarizeJob(const std::vector<protocol::SessionInfo>& sessions) {
  JobSummary out;
  bool ended = true;
  for (const protocol::SessionInfo& s : sessions) {
    absl::StrAppend(&out.signature, s.session_id, ":", static_cast<int>(s.state), ":", s.events,
                    ":", s.dropped_events, ":", s.rejected_events, ";");
    if (s.state == SessionState::kLive) {
      ended = false;
    } else if (!out.last_ended.has_value() || s.ended >= out.last_ended->ended) {
      out.last_ended = s;
    }
  }
  out.all_ended = ended && !sessions.empty();
  return out;
}

uint64_t JobFeed::Check(uint64_t pass, const SessionManager& manager) {
  if (pass_ == pass) return version_;
  pass_ = pass;
  JobSummary summary = SummarizeJob(manager.List(job_id_));
  if (summary.signature != signature_) {
    signature_ = std::move(summary.signature);
    ++version_;
  }
  return version_;
}

JobFeed::Prepared JobFeed::Prepare(const SessionManager& manager, const std::string& job_id,
                                   const DivergenceThresholds& thresholds) {
  Prepared out;
  // The summary first: a session that ends meanwhile shows in the snapshot, and the next version
  // ends the watch.
  JobSummary summary = SummarizeJob(manager.List(job_id));
  out.all_ended = summary.all_ended;
  if (summary.last_ended.has_value()) protocol::ToProto(*summary.last_ended, &out.last_ended);
  absl::StatusOr<v1::JobSnapshot> job = BuildJobSnapshot(manager, job_id, thresholds);
  if (!job.ok()) {
    out.job = job.status();
    return out;
  }
  for (const v1::Snapshot& rank : job->ranks()) {
    absl::StatusOr<SessionManager::Found> found = manager.Find(rank.session().session_id());
    if (found.ok() && found->session != nullptr) {
      const absl::Time newest = found->session->newest_event();
      if (newest != absl::InfinitePast()) {
        out.newest_event_ns = std::max(out.newest_event_ns, absl::ToUnixNanos(newest));
      }
    }
  }
  out.job = std::make_shared<const v1::JobSnapshot>(*std::move(job));
  return out;
}

absl::StatusOr<std::shared_ptr<const v1::Snapshot>> EvictedFeed::Prepare(
    const SessionManager& manager, const std::string& session_id) {
  absl::StatusOr<protocol::Snapshot> snap = manager.GetSnapshot(session_id);
  if (!snap.ok()) return snap.status();
  auto out = std::make_shared<v1::Snapshot>();
  protocol::ToProto(*snap, out.get());
  return out;
}

}  // namespace tracetorch::daemon
