// Watches every session's process from outside: reads each flight recorder (flight_region.h),
// decides when a live session is stalled and when it recovers, reads how its process ended
// (process_probe.h), takes its thread stacks when it stalls (stack_capture.h), and writes a
// forensic bundle (forensics.h) on every unclean end: stalled, aborted, the first NaN/Inf.
//
// State machine of one session (SessionInfo.flight, reported through Session::SetFlight):
//
//   live ──(position unmoved for max(factor x median step, floor), recording, process alive)──►
//   stalled ──(position moves)──► live          a stall: bundle "stalled" with stacks, once
//   live/stalled ──(connection lost without End)──► aborted: bundle "aborted" with the exit once
//                                the process has exited (its pidfd), or after exit_grace when it
//                                still runs (it did not reconnect)
//   any ──(the session's first NaN origin arrives)──► bundle "nan"
//
// "Alive" is the pidfd not yet readable; a stopped process (SIGSTOP) is alive and can stall. The
// daemon's own clock decides how long a position has not moved (it saw it last move at a poll:
// detection lags by at most poll_interval).
//
// Logic without transport: Poll() does one round and takes a clock, so tests drive it with a fake
// clock and fake capturer; Start() runs it on one thread, which also wakes as soon as a watched
// process exits (its pidfd), so the exit status is read before a parent is likely to reap it.
//
// Memory: bundles are kept in memory while their session is watched (at most
// max_bundles_per_session each) and in DATA_DIR/sessions/<id>.forensics.json; without a data
// directory, those of the last kMemoryOnlySessions ended sessions stay in memory.
//
// Thread-safe: Watch(), Bundles() and the counters from any thread; Poll() from one at a time.
#ifndef TRACETORCH_DAEMON_CORE_FLIGHT_MONITOR_H_
#define TRACETORCH_DAEMON_CORE_FLIGHT_MONITOR_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/core/flight_region.h"
#include "daemon/core/process_probe.h"
#include "daemon/core/session.h"
#include "daemon/core/stack_capture.h"
#include "flight/reader.h"

namespace tracetorch::daemon {

struct FlightMonitorOptions {
  flight::StallRule stall_rule;                            // --stall-factor, --stall-floor
  absl::Duration poll_interval = absl::Milliseconds(250);  // --stall-poll
  // An aborted session whose process still runs gets its bundle after this (it did not
  // reconnect within it).
  absl::Duration exit_grace = absl::Seconds(2);
  std::string data_dir;  // Bundles under DATA_DIR/sessions/; empty: memory only.
  size_t max_bundles_per_session = 8;
  size_t history_layers = 8;  // BundleInputs::history_layers.
};

struct FlightMonitorStats {
  uint64_t watched = 0;    // Sessions followed now.
  uint64_t recorders = 0;  // ...of which with a flight recorder.
  uint64_t stalled = 0;    // Stalled now.
  uint64_t stalls_total = 0;
  uint64_t bundles_total = 0;
  uint64_t bundle_errors = 0;  // Bundles that could not be written to disk (kept in memory).
  uint64_t stacks_taken = 0;   // Tools that produced stacks.
};

class FlightMonitor {
 public:
  using Clock = std::function<absl::Time()>;
  static constexpr size_t kMemoryOnlySessions = 64;

  // `stacks` (not owned; null: no stacks) must outlive the monitor.
  FlightMonitor(FlightMonitorOptions options, StackCapturer* stacks, Clock clock = absl::Now);
  ~FlightMonitor();  // Stop().
  FlightMonitor(const FlightMonitor&) = delete;
  FlightMonitor& operator=(const FlightMonitor&) = delete;

  // What to follow of a session's process.
  struct Target {
    int32_t pid = -1;  // For its stacks.
    int32_t uid = -1;
    std::shared_ptr<ProcessProbe> probe = nullptr;   // Null: its exit cannot be followed.
    std::shared_ptr<FlightRegion> region = nullptr;  // Null: the agent passed no recorder.
  };
  // Follows `session` (a Hello was accepted). A session followed already (a resume) is followed
  // anew, keeping its bundles and stall count.
  void Watch(std::shared_ptr<Session> session, Target target) ABSL_LOCKS_EXCLUDED(mu_);

  // One round over every followed session (see the state machine above).
  void Poll() ABSL_LOCKS_EXCLUDED(mu_, poll_mu_);

  // Runs Poll() on a thread every poll_interval, and as soon as a followed process exits.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // The bundles of `session_id` (serialized tracetorch.v1.ForensicBundle), oldest first: from
  // memory, else from its file. With `now` and a live session with a recorder, one more taken
  // now (reason "now"; no stacks). Empty when it has none; Internal for a file that does not read.
  absl::StatusOr<std::vector<std::string>> Bundles(std::string_view session_id, bool now)
      ABSL_LOCKS_EXCLUDED(mu_);

  FlightMonitorStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Watched;

  // The work of one round for one session; true when it is done with (forgotten).
  bool PollOne(Watched& w, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Builds, keeps and writes a bundle.
  void AddBundle(Watched& w, Session& session, std::string reason,
                 std::vector<ThreadStacksResult> stacks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Run();

  const FlightMonitorOptions options_;
  StackCapturer* const stacks_;
  const Clock clock_;

  // Serialises rounds: Watched entries are touched only by the round in progress.
  absl::Mutex poll_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Watched>> watched_ ABSL_GUARDED_BY(mu_);
  // Bundles by session id (serialized), for sessions followed now and, without a data directory,
  // the last kMemoryOnlySessions ended ones (in `ended_` order).
  absl::flat_hash_map<std::string, std::vector<std::string>> bundles_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> ended_ ABSL_GUARDED_BY(mu_);
  FlightMonitorStats stats_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int wake_fd_ = -1;  // eventfd: Watch() and Stop() wake the thread's poll().
  std::thread thread_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_FLIGHT_MONITOR_H_
