// What the live-watch hub (daemon/core/watch_hub.h) keeps per watched thing, shared by all its
// viewers:
//
//   SessionFeed   a session in memory: its latest Session::WatchView (rebuilt only when the
//                 session's version moved), the full snapshot sharing it, and the deltas built
//                 from it per base version (daemon/core/watch_delta.h).
//   JobFeed       a job (every session with one job id): a version bumped when the job's sessions
//                 (ids, states, event counts) change, and its JobSnapshot, prepared off the hub
//                 thread (Prepare) and taken back by the hub (Preparation).
//   EvictedFeed   a session no longer in memory: its last snapshot, read from disk off the hub
//                 thread, once.
//
// The work that may be slow (reading snapshot files, building every rank's snapshot and the
// cross-rank divergence) is in the static Prepare functions, which only read the SessionManager:
// the hub runs them on its worker. Everything else is cheap and in memory.
//
// Thread-compatible: the hub's poller owns the feeds; Prepare functions are thread-safe.
#ifndef TRACETORCH_DAEMON_CORE_WATCH_FEED_H_
#define TRACETORCH_DAEMON_CORE_WATCH_FEED_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "daemon/core/session.h"
#include "daemon/core/session_manager.h"
#include "trace/divergence.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {

// A value prepared elsewhere for one version of what it shows: which version is being prepared
// (at most one at a time, so the worker's queue holds at most one task per feed) and the newest
// one taken back. Versions only grow.
template <typename T>
class Preparation {
 public:
  struct Ready {
    uint64_t version = 0;
    T value;
  };

  // Whether to start preparing `version` for a viewer that wants `wanted` or newer: false when
  // one is in flight (one at a time: a viewer wanting newer waits for it and asks again), or the
  // one taken back is at `wanted` or newer. True marks `version` in flight.
  // REQUIRES: version >= wanted.
  bool Start(uint64_t wanted, uint64_t version) {
    if (in_flight_.has_value() || AtOrAfter(wanted) != nullptr) return false;
    in_flight_ = version;
    return true;
  }
  // Takes back the value prepared for `version`; kept unless one at the same version or newer
  // was taken back already.
  void Accept(uint64_t version, T value) {
    if (in_flight_.has_value() && *in_flight_ <= version) in_flight_.reset();
    if (ready_.has_value() && ready_->version >= version) return;
    ready_ = Ready{version, std::move(value)};
  }
  // The value taken back, when its version is `wanted` or newer; else null.
  const Ready* AtOrAfter(uint64_t wanted) const {
    return ready_.has_value() && ready_->version >= wanted ? &*ready_ : nullptr;
  }
  bool in_flight() const { return in_flight_.has_value(); }

 private:
  std::optional<uint64_t> in_flight_;
  std::optional<Ready> ready_;
};

class SessionFeed {
 public:
  explicit SessionFeed(std::shared_ptr<Session> session) : session_(std::move(session)) {}

  const Session* session() const { return session_.get(); }

  // The session's version, read once per hub pass (`pass` numbers them).
  uint64_t Version(uint64_t pass);

  // The view at the current version: built once per version, whatever the number of viewers. Its
  // versions only: its snapshot is moved into full(), in the form viewers are sent.
  const Session::WatchView& Refresh(uint64_t pass);
  // The full snapshot of the view. REQUIRES: Refresh() was called.
  const std::shared_ptr<const v1::Snapshot>& full() const { return full_; }
  // The delta from `base` to the view (built once per base, shared), or null when the full should
  // be sent instead: the delta would not be smaller, or cannot keep the order. REQUIRES: Refresh().
  std::shared_ptr<const v1::Snapshot> Delta(uint64_t base);

 private:
  const std::shared_ptr<Session> session_;
  uint64_t pass_ = 0;  // The pass in which `version_` was read.
  uint64_t version_ = 0;
  std::shared_ptr<const Session::WatchView> view_;  // The latest built.
  std::shared_ptr<const v1::Snapshot> full_;        // view_'s snapshot, converted.
  size_t full_bytes_ = 0;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const v1::Snapshot>> deltas_;  // By base.
};

// A job's sessions as the hub compares them from pass to pass.
struct JobSummary {
  std::string signature;   // Ids, states and event counts: changes whenever a viewer should hear.
  bool all_ended = false;  // At least one session, and none live.
  std::optional<protocol::SessionInfo> last_ended;  // The ended one with the latest end time.
};
JobSummary SummarizeJob(const std::vector<protocol::SessionInfo>& sessions);

class JobFeed {
 public:
  // A JobSnapshot prepared for one version of the job, with what ends a watch of it.
  struct Prepared {
    absl::StatusOr<std::shared_ptr<const v1::JobSnapshot>> job;
    int64_t newest_event_ns = 0;  // Over its ranks (WatchUpdate.newest_event_unix_ns).
    bool all_ended = false;
    v1::SessionInfo last_ended;  // The session_ended of a job that has ended.
  };

  explicit JobFeed(std::string job_id) : job_id_(std::move(job_id)) {}

  const std::string& job_id() const { return job_id_; }

  // Reads the job's sessions (SessionManager::List, once per hub pass) and returns the job's
  // version: bumped whenever their summary's signature changed.
  uint64_t Check(uint64_t pass, const SessionManager& manager);

  // Builds the job's snapshot (BuildJobSnapshot: every rank's snapshot, possibly read from disk,
  // and the divergence) as it is now. Thread-safe; slow: the hub runs it on its worker.
  static Prepared Prepare(const SessionManager& manager, const std::string& job_id,
                          const DivergenceThresholds& thresholds);

  Preparation<Prepared>& preparation() { return preparation_; }

 private:
  const std::string job_id_;
  uint64_t pass_ = 0;
  uint64_t version_ = 0;
  std::string signature_;  // What `version_` was computed from.
  Preparation<Prepared> preparation_;
};

class EvictedFeed {
 public:
  explicit EvictedFeed(std::string session_id) : session_id_(std::move(session_id)) {}

  const std::string& session_id() const { return session_id_; }

  // The session's snapshot from disk (SessionManager::GetSnapshot; no history). Thread-safe;
  // slow: the hub runs it on its worker.
  static absl::StatusOr<std::shared_ptr<const v1::Snapshot>> Prepare(const SessionManager& manager,
                                                                     const std::string& session_id);

  // An evicted session does not change: one version, 0.
  Preparation<absl::StatusOr<std::shared_ptr<const v1::Snapshot>>>& preparation() {
    return preparation_;
  }

 private:
  const std::string session_id_;
  Preparation<absl::StatusOr<std::shared_ptr<const v1::Snapshot>>> preparation_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_WATCH_FEED_H_
