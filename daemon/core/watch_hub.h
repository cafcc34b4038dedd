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
//    InvalidArgument. Ticks fall on the feed's phase plus multiples of the interval since the Unix
//    epoch, so the viewers of one session (one job) with the same interval tick together and share
//    the work of building their updates (and with intervals that are multiples of each other, on
//    the ticks they have in common). Feeds are given different phases, spread over min_interval
//    in the order they were made (the k-th: min_interval * frac(k * 0.618...), the golden-ratio
//    sequence: 0, 30.9, 11.8, 42.7, 23.6 ms, ... at 50 ms), so that the work of many watched
//    sessions comes as many small passes over the interval, not as one burst: a viewer's update
//    never waits for the other sessions' updates of the same tick.
//  - One write in flight. A tick that finds the viewer still writing leaves one pending state; a
//    later tick with new changes REPLACES it (counted in updates_coalesced, and the skipped
//    sequence number shows the gap to the viewer). When the write completes, the newest state is
//    built and sent. Nothing queues: ingest and other viewers never wait for a viewer.
//  - Session end (finished / aborted): the final `full`, then `session_ended`, then the stream is
//    closed OK. A session no longer in memory (evicted) gets its last snapshot as read from disk
//    (no history), then the same end. A job watch ends the same way once every session of the job
//    has ended (the `session_ended` carries the session that ended last). A state that cannot be
//    prepared (the evicted session's file is gone, the job's sessions were forgotten) closes the
//    stream with that error.
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
// Preparation: the states that are slow to build — an evicted session's snapshot (read from disk)
// and a job's (every rank's snapshot and the cross-rank divergence) — are never built on the hub
// thread, which serves every viewer: they are prepared by the executor (a worker thread of the
// hub's own by default; daemon/core/watch_feed.h has the work), one at a time per feed whatever
// the number of viewers, and the hub takes them back on the pass after they are ready. Until then
// a viewer waiting for one holds a pending state of the version it asked for; when the one that
// comes back is older than that, the next is started. The other viewers are served as usual. A job
// viewer is sent the first job snapshot prepared at or after the job's version at its tick (or at
// its coalesced tick). A live session's state is a copy of memory (Session::GetWatchView) and is
// built on the hub thread.
//
// Units: the per-viewer rules are a state machine (daemon/core/watch_viewer.h), the delta a pure
// function (daemon/core/watch_delta.h), the shared per-session and per-job state feeds
// (daemon/core/watch_feed.h); the hub keeps the locks, the feeds' sharing and the dispatch.
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
#include "daemon/core/serial_worker.h"
#include "daemon/core/session.h"
#include "daemon/core/session_manager.h"
#include "daemon/core/watch_feed.h"
#include "daemon/core/watch_viewer.h"
#include "trace/divergence.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {

// One update for one viewer, with its wire form: the bytes `update` serializes to are `shared`
// (when not null) followed by `own`. `shared` is the update's payload (its full, delta or job
// alone, as a serialized WatchUpdate), serialized once for every viewer that one hub pass sends
// the same payload to, and the same object for all of them; `own` is the rest (the sequence and
// times), or the whole update when it has no payload to share (session_ended, shutdown).
// Protobuf parses concatenated serializations as one message with the fields of both, so parsing
// shared + own gives exactly *update; a transport that writes those bytes (watch_service.cc)
// serializes each payload once per pass instead of once per viewer.
struct WatchWrite {
  std::shared_ptr<const v1::WatchUpdate> update;
  std::shared_ptr<const std::string> shared;
  std::string own;
};

// One viewer's outbound stream, as the hub uses it. The hub calls a sink from one thread at a
// time, never again after Close(), and keeps at most one SendUpdate outstanding.
class WatchSink {
 public:
  virtual ~WatchSink() = default;
  // Starts writing `write` (its update, or the same bytes as its wire form); must not block. The
  // sink holds what it writes until the write completes and then calls WatchHub::WriteDone (from
  // any thread, possibly before this returns).
  virtual void SendUpdate(WatchWrite write) = 0;
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
  // Where the slow states are prepared (see Preparation above): called from the hub thread (inside
  // a pass, so it must not call the hub) with a task to run exactly once, on another thread or at
  // once (then Poll() takes the result back in the same call); a viewer waits for it until then.
  // The task calls only the SessionManager and the hub's hand-back, which outlives the hub (after
  // Shutdown() its result is dropped). Null: a worker thread of the hub's own, stopped by
  // Shutdown().
  std::function<void(std::function<void()> task)> prepare;
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

  // One pass at clock(): new viewers, prepared states taken back, due ticks, completed writes,
  // cancellations; then another at once while a preparation it started is already done (an
  // executor that runs tasks at once). Returns when the next tick is due (InfiniteFuture when
  // none). The hub thread calls it; with start_thread = false the owner does.
  absl::Time Poll() ABSL_LOCKS_EXCLUDED(poll_mu_, mu_);

  // Sends `shutdown` to every viewer, waits up to shutdown_grace for them to take it, closes every
  // sink (OK after a delivered shutdown, else UNAVAILABLE), stops the threads (preparations still
  // queued are dropped; one that completes later is ignored). Later Subscribe calls get
  // Unavailable. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(poll_mu_, mu_);

  WatchHubStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Viewer;   // One viewer: its state machine and the feed it watches.
  struct Mailbox;  // Where prepared states are handed back to the hub.
  // A feed and how many viewers share it.
  template <typename F>
  struct Shared {
    std::shared_ptr<F> feed;
    int viewers = 0;
    absl::Duration phase;  // Of its viewers' ticks (see Interval above).
  };

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
  // A preparation: runs elsewhere, returns what the poller runs to take its result back.
  using PrepareTask = std::function<std::function<void()>()>;

  absl::Time PollLocked(bool force_close, bool* all_closed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  void AddViewers(std::vector<Incoming> incoming, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  // Runs what the preparations handed back; whether there was any.
  bool TakePrepared() ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  bool HasPrepared() const;
  // Carries out the viewer's next step into `pass`.
  void Decide(Viewer& v, const WatchViewer::Link& link, const WatchViewer::Pass& now, Pass& pass)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  // kSendState, per kind of feed.
  void SendSessionState(Viewer& v, absl::Time now, Pass& pass)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  void SendJobState(Viewer& v, absl::Time now, Pass& pass) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  void SendEvictedState(Viewer& v, absl::Time now, Pass& pass)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  uint64_t CurrentVersion(Viewer& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  void Close(Viewer& v, absl::Status status, Pass& pass) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  void Detach(Viewer& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  // The tick phase of the next feed made (see Interval above).
  absl::Duration NextPhase() ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  // Starts `task` on the executor (or the worker).
  void StartPreparing(PrepareTask task);
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);
  void Run() ABSL_LOCKS_EXCLUDED(poll_mu_, mu_);
  absl::Duration ClampInterval(double seconds, absl::Status* error) const;

  const SessionManager* const manager_;
  const WatchHubOptions options_;
  const std::shared_ptr<Mailbox> mailbox_;
  std::unique_ptr<SerialWorker> worker_;  // Without options_.prepare. Constant after construction.

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
  uint64_t feeds_made_ ABSL_GUARDED_BY(poll_mu_) = 0;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Viewer>> viewers_ ABSL_GUARDED_BY(poll_mu_);
  absl::flat_hash_map<const Session*, Shared<SessionFeed>> feeds_ ABSL_GUARDED_BY(poll_mu_);
  absl::flat_hash_map<std::string, Shared<JobFeed>> job_feeds_ ABSL_GUARDED_BY(poll_mu_);
  absl::flat_hash_map<std::string, Shared<EvictedFeed>> evicted_feeds_ ABSL_GUARDED_BY(poll_mu_);

  std::atomic<uint64_t> updates_sent_{0};
  std::atomic<uint64_t> updates_coalesced_{0};
  std::thread thread_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_WATCH_HUB_H_
