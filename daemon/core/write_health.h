// How one kind of the daemon's file writes (session snapshots, the index, baselines) is faring:
// the failures it counts, the one log line per cause, and the back-off before the next attempt,
// so that a data directory that fills up, turns read-only or loses a file is survived quietly and
// caught up by itself.
//
//   Failed(status)  counts the failure (the DaemonCounters field given), logs it when its cause
//                   (the status code: ResourceExhausted for a full disk, PermissionDenied for a
//                   read-only one, NotFound for a removed folder) differs from the last one
//                   logged, and, for an attempt that was Due, waits the next back-off
//                   (guest/backoff.h without jitter: initial_backoff, doubling to max_backoff);
//                   a write that could not wait (a session's final snapshot) failing inside the
//                   back-off leaves it as it is
//   Succeeded()     ends a failing spell: one line says how many writes failed, the back-off
//                   resets
//   Due(now)        whether a write that may wait (a periodic snapshot, a retry) should be tried
//                   now: always while healthy, once the back-off has passed while failing
//
// Thread-safe.
#ifndef TRACETORCH_DAEMON_CORE_WRITE_HEALTH_H_
#define TRACETORCH_DAEMON_CORE_WRITE_HEALTH_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "guest/backoff.h"

namespace tracetorch::daemon {

struct WriteHealthOptions {
  absl::Duration initial_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(30);
};

class WriteHealth {
 public:
  // `what` names the writes in log lines ("snapshot", "index", "baseline"). `errors` (not owned,
  // may be null) counts every failure.
  WriteHealth(std::string what, std::atomic<uint64_t>* errors, WriteHealthOptions options = {});

  void Failed(const absl::Status& status, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  void Succeeded() ABSL_LOCKS_EXCLUDED(mu_);
  bool Due(absl::Time now) const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the latest attempt failed.
  bool failing() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string what_;
  std::atomic<uint64_t>* const errors_;
  const WriteHealthOptions options_;

  mutable absl::Mutex mu_;
  uint64_t failures_ ABSL_GUARDED_BY(mu_) = 0;                   // In the current failing spell.
  std::optional<absl::StatusCode> logged_ ABSL_GUARDED_BY(mu_);  // The cause last logged.
  guest::Backoff backoff_ ABSL_GUARDED_BY(mu_);
  absl::Time next_attempt_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_WRITE_HEALTH_H_
