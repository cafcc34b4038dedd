// Live Watch subscriptions (service.proto TraceService.Watch) as plain C++: what each viewer is
// sent and when. The gRPC reactor in watch_service.cc is a thin WatchSink over it; tests drive the
// hub with fake sinks and a fake clock.
//
// Per viewer:
//  - The current state at once (a `full` Snapshot, or a `job` for a job watch), then, at every
//    tick of its interval where something changed, the new state: a `delta` (the layers and
//    history entries changed since the viewer's previous update; session info, metadata and
//    anomalies complete) when that is smaller than the `full`, else the `full`. A history entry
//    in a delta carries only the points changed since the viewer's copy and those after them
//    (LayerHistory.append = true), after thin_before_step when the history was thinned once since
//    the viewer's copy (the viewer replays that thinning on its copy first), or the layer's whole
//    history (append = false) when the layer is new to the viewer or its history was thinned
//    twice or more since the viewer's copy (a slow viewer's coalesced gap: the copy can no longer
//    be continued). A job watch always gets the whole `job`.
//  - Interval: 0 means the default (0.5 s); shorter than the minimum (0.05 s) is raised to the
//    minimum, longer than the maximum (1 h) lowered to it; negative or not finite is
//    InvalidArgument. Ticks fall on multiples of the interval since the Unix epoch, so viewers with
//    the same interval tick together and share the work of building their updates.
//  - One write in flight. A tick that finds the viewer still writing leaves one pending state; a
//    later tick with new changes REPLACES it (counted in updates_coalesced, and the skipped
//    sequence number shows the gap to the viewer). When the write completes, the newest state is
//    built and sent. Nothing queues: ingest and other viewers never wait for a viewer.
//  - Session end (finished / aborted): the final `full`, then `session_ended`, then the stream is
//    closed OK. A job watch ends the same way once every session of the job has ended (the
//    `session_ended` carries the session that ended last).
//  - Shutdown(): a `shutdown` update to every viewer, then close OK; a viewer that cannot take it
//    within the grace period is closed UNAVAILABLE.
//
// Work sharing: per watched session the hub keeps the latest Session::WatchView (rebuilt only when
// the session's version moved) and the deltas built from it per base version; an update shares its
// payload with every other viewer of the same state (only the sequence and times are per viewer).
// What a viewer holds is exactly the session's state at the version of its last update (its
// base), so the base alone decides each layer's delta — the per-point change versions and the
// versions of the latest two thinnings (Session::WatchView) say which points it lacks — and viewers
// at the same base share one delta.
//
// Threading: one hub thread (or the caller of Poll() in tests) builds updates and calls the sinks;
// never two calls on one sink at once, never while holding the hub's locks. Subscribe, WriteDone,
// Cancel and Remove may be called from any thread (the gRPC reactors) and never block on a sink
// or on snapshot building.
#ifndef TRACETORCH_DAEMON_CORE_WATCH_HUB_H_
#define TRACETORCH_DAEMON_CORE_WATCH_HUB_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/core/session.h"
#include "daemon/core/session_manager.h"
#include "trace/divergence.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {

// One viewer's outbound stream, as the hub uses it. The hub calls a sink from one thread at a
// time, never again after Close(), and keeps at most one SendUpdate outstanding.
class WatchSink {
 public:
  virtual ~WatchSink() = default;
  // Starts writing `update`; must not block. The sink holds `update` until the write completes
  // and then calls WatchHub::WriteDone (from any thread, possibly before this returns).
  virtual void SendUpdate(std::shared_ptr<const v1::WatchUpdate> update) = 0;
  // Ends the stream with `status`: the hub's last call on this sink. The sink must stay valid
  // until this call (it may go away right after it: tell the hub with WatchHub::Remove).
  virtual void Close(const absl::Status& status) = 0;
};

struct WatchHubOptions {
  absl::Duration default_interval = absl::Milliseconds(500);
  absl::Duration min_interval = absl::Milliseconds(50);
  absl::Duration max_interval = absl::Hours(1);
  // How long Shutdown() waits (real time) for viewers to take their `shutdown` update.
  absl::Duration shutdown_grace = absl::Milliseconds(500);
  // Run the hub thread (the daemon). Without it the owner calls Poll() (tests).
  bool start_thread = true;
  // The daemon clock: ticks, sent_unix_ns. A fake in tests (with start_thread = false).
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  // For job watches (cross-rank divergence).
  DivergenceThresholds divergence;
};

struct WatchHubStats {
  uint64_t watchers = 0;           // Open streams (subscribed, not yet closed).
  uint64_t updates_sent = 0;       // SendUpdate calls.
  uint64_t updates_coalesced = 0;  // Pending states replaced before a slow viewer took them.
};

class WatchHub {
 public:
  // `manager` must outlive the hub.
  explicit WatchHub(const SessionManager* manager, WatchHubOptions options = {});
  ~WatchHub();  // Shutdown().
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // Registers a viewer; its first update follows promptly. `sink` must stay valid until the hub
  // calls its Close(). "latest" resolves to the most recently started session now.
  // InvalidArgument: no target, an empty session or job id, a negative or non-finite interval.
  // NotFound: unknown session, or no session with that job id. Unavailable: shutting down.
  absl::StatusOr<uint64_t> Subscribe(const v1::WatchRequest& request, WatchSink* sink)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The viewer's outstanding write completed; `ok` false: the stream is broken (the hub closes
  // it, CANCELLED). Unknown or closed viewers are ignored.
  void WriteDone(uint64_t viewer, bool ok) ABSL_LOCKS_EXCLUDED(mu_);
  // The client went away: the sink is closed (CANCELLED) once no write is outstanding.
  void Cancel(uint64_t viewer) ABSL_LOCKS_EXCLUDED(mu_);
  // The sink is gone (it was closed). Unknown ids are ignored.
  void Remove(uint64_t viewer) ABSL_LOCKS_EXCLUDED(mu_);

  // One pass at clock(): new viewers, due ticks, completed writes, cancellations. Returns when
  // the next tick is due (InfiniteFuture when none). The hub thread calls it; with
  // start_thread = false the owner does.
  absl::Time Poll() ABSL_LOCKS_EXCLUDED(poll_mu_, mu_);

  // Sends `shutdown` to every viewer, waits up to shutdown_grace for them to take it, closes every
  // sink (OK after a delivered shutdown, else UNAVAILABLE), stops the thread. Later Subscribe
  // calls get Unavailable. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(poll_mu_, mu_);

  WatchHubStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Feed;     // One watched session's cached state, shared by its viewers.
  struct JobFeed;  // The same for a job.
  struct ViewerState;

  // What a sink's callbacks share with the poller.
  struct Link {
    WatchSink* sink = nullptr;
    bool writing = false;       // A SendUpdate is outstanding.
    bool wake_on_done = false;  // The poller wants to hear when it completes.
    bool failed = false;        // A write failed.
    bool cancelled = false;
    bool closed = false;  // Close() was (being) called.
  };

  // A subscription not yet picked up by the poller.
  struct Incoming {
    uint64_t id = 0;
    absl::Duration interval;
    std::string session_id;            // Session watch.
    std::shared_ptr<Session> session;  // Null: evicted (read from disk once).
    std::string job_id;                // Job watch.
  };

  struct Pass;  // One Poll pass's decisions.

  absl::Time PollLocked(bool force_close, bool* all_closed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Run() ABSL_LOCKS_EXCLUDED(poll_mu_, mu_);
  absl::Duration ClampInterval(double seconds, absl::Status* error) const;

  const SessionManager* const manager_;
  const WatchHubOptions options_;

  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(poll_mu_);
  absl::flat_hash_map<uint64_t, Link> links_ ABSL_GUARDED_BY(mu_);
  std::vector<Incoming> incoming_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t open_ ABSL_GUARDED_BY(mu_) = 0;  // Links not closed.
  bool wake_ ABSL_GUARDED_BY(mu_) = false;  // The poller has work before its next tick.
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_thread_ ABSL_GUARDED_BY(mu_) = false;

  // The poller's own state: only Poll passes (serialised by poll_mu_) touch it.
  absl::Mutex poll_mu_;
  uint64_t pass_ ABSL_GUARDED_BY(poll_mu_) = 0;
  absl::flat_hash_map<uint64_t, std::unique_ptr<ViewerState>> viewers_ ABSL_GUARDED_BY(poll_mu_);
  absl::flat_hash_map<const Session*, std::shared_ptr<Feed>> feeds_ ABSL_GUARDED_BY(poll_mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<JobFeed>> job_feeds_ ABSL_GUARDED_BY(poll_mu_);

  std::atomic<uint64_t> updates_sent_{0};
  std::atomic<uint64_t> updates_coalesced_{0};
  std::thread thread_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_WATCH_HUB_H_
