// One traced session of the in-process agent, whichever door drives it. The Python extension's
// _SessionEngine (agent/python/bind_session.cc) and the libtorch door's tracetorch::TraceSession
// (agent/libtorch/trace_session.cc) are thin adapters over this class: it owns the parts a session
// wires together and the order they start and stop in, so that both doors produce the same record.
//
//   the Tracer         (agent/tracer.h)          for the session's life; the door calls its
//                                                DeclareLayer/BeginCall/EndCall/AbortCall itself;
//   the flight recorder (agent/flight_setup.h)   for the session's life, given to the Tracer and
//                                                to every daemon stream;
//   the daemon stream  (agent/daemon_sink.h)     per block, after ConnectDaemon();
//   the watch file     (agent/watch_flusher.h)   per block, after StartWatch();
//   the op watch       (agent/ops/nan_op_watch.h, ops="on_nan") per block, after SetOps(); the
//                                                door drives its steps and module passes.
//
// A block is Start() .. Finish(). Before it (REQUIRES: not active): ConnectDaemon, SetOps. Inside
// it the door's hooks run; StartWatch/StopWatch may come at any time. Finish() ends it in this
// order:
//   1. stop the watch flusher (a flush in progress completes; its thread is joined);
//   2. stop the Tracer (samples in flight are collected with its bounded wait);
//   3. the op watch's last sync (the last step's backward may have named an origin the watch
//      keeps a graph for; see "The op watch");
//   4. detach the sink and close the stream: the End (total time, hook errors) and what is queued
//      get at most kCloseWait; what the daemon did not take is counted as dropped; a stream that
//      did not complete is logged once per process, never an error of Finish;
//   5. finalise the record: anomalies, total time, then Decorate (below);
//   6. write the final watch file (with anomalies) when the flusher was running.
// A failure of step 5 or 6 is counted in the Tracer's hook errors ("finalize",
// "watch_final_flush") and returned; the record is finished either way (a failed finalisation
// keeps the trace so far, without anomalies, and writes no watch file).
//
// Decoration, the same for both doors, on every record this class returns: a block that streams
// carries metadata.extra["dropped_events"] (the stream's drop count, live or at its close); with
// ops, the kept op graph (TraceRecord::op_graph) and the NaN origin's op (op, op_func,
// op_module) when the origin is at the kept step.
//
// The op watch: the door begins the watch's step at the root call (BeginOpsStep), brackets the
// other module calls with op_watch()->PushModule/PopModule (and, for an operator that began a
// step inside its own start callback, StartOp/EndOp), and ends the step at the root call's end
// (EndOpsStep). Before each step, after it and at Finish() the session syncs the watch with the
// layer trace's origin (NanOpWatch::TakeReport): the first time a graph is kept it is published
// for every reader (kept_ops(), the records), its origin adopted by the Tracer when the layers
// have none, and it is streamed to the daemon once (the only place that streams an op graph).
//
// Thread-safety: thread-safe, except the op watch: op_watch(), BeginOpsStep and EndOpsStep run on
// the thread of the door's module calls (the owner thread: the libtorch door's Start() thread, or
// the Python door's calls, serialised by the GIL), never concurrently with SetOps or Finish. No
// method blocks for long but Finish(), Abandon(), CloseStream(), ConnectDaemon() (it closes a
// stream still open), StartWatch(), StopWatch() and the destructor (bounded waits: the flusher's
// join, the stream's close); a door that holds a lock the flusher or the sink might need (the GIL)
// releases it around them. The Tracer is thread-safe.
//
// Fork: in a child forked after Create() the Tracer is inert (agent/tracer.h): Start() fails
// with FailedPrecondition; the sink and the flusher never wait there.
//
// Errors: nothing throws. absl::Status for every failure a caller can act on, with the codes each
// method lists.
//
// Example (what a door does):
//   SessionOptions options;
//   options.metadata.model_name = "Net";
//   absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(options));
//   (*session)->tracer().DeclareLayer(...);  // The model's layers.
//   (*session)->ConnectDaemon("unix:///run/tracetorch/tracetorchd.sock", metadata);
//   (*session)->Start();
//   ... hooks: tracer().BeginCall / EndCall ...
//   (*session)->Finish(total_ms);
//   TraceRecord r = (*session)->Snapshot();
#ifndef TRACETORCH_AGENT_SESSION_H_
#define TRACETORCH_AGENT_SESSION_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/daemon_sink.h"
#include "agent/ops/nan_op_watch.h"
#include "agent/tracer.h"
#include "agent/watch_flusher.h"
#include "client/daemon_client.h"
#include "flight/recorder.h"
#include "trace/record.h"

namespace tracetorch::agent {

struct SessionOptions {
  TracerOptions tracer = {};
  TraceMetadata metadata = {};  // The Tracer's.
};

// ops="on_nan" for the next block.
struct OpsOptions {
  std::string model_name = "";  // Named in the kept graph.
  std::string root_type = "";   // The root module's class name.
  std::string source = "";      // OpGraph::source: "eager" (the Python door), "cpp" (libtorch).
  struct Parameter {
    std::string name = "";  // "fc.weight"
    at::Tensor tensor = {};
    bool buffer = false;
  };
  std::vector<Parameter> parameters = {};  // The parameters and buffers ops may read.
};

// The daemon stream's counters and session id, of the current or last closed stream.
struct StreamStats {
  client::DaemonClientStats client = {};
  std::string session_id = "";  // Empty until the daemon's handshake.
};

// The op watch's counters.
struct OpsStats {
  int64_t recorded_steps = 0;
  int64_t skipped_steps = 0;  // Another op recorder was active on the thread.
  std::optional<int64_t> kept_step = std::nullopt;
};

// The graph kept by the op watch: the graph (what a record holds), its op_graph_json document
// (what the daemon is sent) and the origin op it names.
struct KeptOps {
  std::shared_ptr<const OpGraph> graph = nullptr;
  std::string json = "";
  ops::KeptOrigin origin = {};
};

class Session {
 public:
  // How long Finish() lets the daemon take the end of a stream.
  static constexpr absl::Duration kCloseWait = absl::Seconds(1);

  // InvalidArgument when options.tracer.thresholds do not Validate().
  static absl::StatusOr<std::unique_ptr<Session>> Create(SessionOptions options);

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  // Stops the flusher and closes a stream still open (bounded waits); the Tracer stops when its
  // last owner lets it go.
  ~Session();

  Tracer& tracer() const { return *tracer_; }
  // Whether the session has a flight recorder (agent/flight_setup.h: it may be disabled).
  bool has_flight_recorder() const { return recorder_ != nullptr; }

  // ---- Before a block (FailedPrecondition while active) ----------------------------------------
  // Streams the next block (until Finish()) to the daemon at `address` (a socket path or unix://
  // address; empty: the client's default socket), with `identity` as the stream's identity
  // (protocol::IdentityFor). Closes a stream still open first. Never waits for the daemon: when it
  // is away the client retries in the background, and what it misses is dropped and counted.
  // InvalidArgument for a malformed address.
  absl::Status ConnectDaemon(std::string address, const TraceMetadata& identity)
      ABSL_LOCKS_EXCLUDED(mu_);
  // ops="on_nan" for the next blocks with these parameters, or (nullopt) no op recording. Forgets
  // the graph kept before.
  absl::Status SetOps(std::optional<OpsOptions> ops) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- A block --------------------------------------------------------------------------------
  // Starts a clean trace (Tracer::Start); forgets the last block's record. A block without a
  // stream also forgets the last stream's counters. FailedPrecondition when active or in a forked
  // child.
  absl::Status Start() ABSL_LOCKS_EXCLUDED(mu_);
  bool active() const { return tracer_->active(); }

  // Writes the trace so far to `path` every `interval` (WatchFlusher, Tracer::WatchSnapshot),
  // replacing a flusher already running; Finish() writes it once more, with anomalies.
  // InvalidArgument for an empty path or an interval below WatchFlusher::kMinInterval;
  // ResourceExhausted when no thread can be started.
  absl::Status StartWatch(std::string path, absl::Duration interval) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the flusher (joins its thread) without a final write. Idempotent.
  void StopWatch() ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the block (see the order above) and returns the failure of the finalisation (the
  // Tracer's error) or else of the final watch write (WriteTraceFile's: NotFound,
  // PermissionDenied, ...); the record is finished either way. Idempotent in effect: a second
  // call finishes the same stopped trace again. REQUIRES: the owner thread (the op watch's).
  absl::Status Finish(std::optional<double> total_time_ms) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the block from another thread than the owner's (a libtorch session destroyed there):
  // steps 1, 2 and 4 of Finish() without a total time; the op watch is not touched and the record
  // is not finalised.
  void Abandon() ABSL_LOCKS_EXCLUDED(mu_);

  // Detaches the sink and closes the stream (the End with `total_time_ms` and the hook errors),
  // waiting at most `wait`. OK without a stream; DeadlineExceeded when the daemon did not take
  // everything in time (the rest is counted as dropped); FailedPrecondition in a forked child.
  // The Python door calls it at interpreter exit inside a block; Finish() calls it itself.
  absl::Status CloseStream(absl::Duration wait, std::optional<double> total_time_ms)
      ABSL_LOCKS_EXCLUDED(mu_);

  // ---- The op watch (owner thread only; see the file comment) ----------------------------------
  // The block's op watch, or nullptr without ops.
  ops::NanOpWatch* op_watch() const { return watch_.get(); }
  // The root call begins with `inputs`: syncs the watch, then begins its step (its index: the
  // Tracer's current step). Returns whether the watch records the step (false: a graph is already
  // kept, or another recorder is active on the thread, counted in skipped_steps).
  // REQUIRES: op_watch() != nullptr.
  bool BeginOpsStep(const std::vector<at::Tensor>& inputs) ABSL_LOCKS_EXCLUDED(mu_);
  // The root call ended with `outputs` (nullptr: it raised): ends the watch's step, counts its new
  // errors in the Tracer ("ops") and syncs the watch (a newly kept graph is published and
  // streamed once). REQUIRES: op_watch() != nullptr.
  void EndOpsStep(const std::vector<at::Tensor>* outputs) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Results (any thread) -------------------------------------------------------------------
  // The record of the last finished block; nullopt inside a block and before the first.
  std::optional<TraceRecord> finished_record() const ABSL_LOCKS_EXCLUDED(mu_);
  // The finished record; inside a block, the trace so far without anomalies (Tracer::Snapshot).
  // Decorated.
  TraceRecord Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  // The finished record; inside a block, the trace so far with its anomalies
  // (Tracer::Finalize(nullopt)). Decorated. The Tracer's error (FailedPrecondition in a forked
  // child) when it cannot finalise.
  absl::StatusOr<TraceRecord> Current() const ABSL_LOCKS_EXCLUDED(mu_);

  // Whether a stream is open (ConnectDaemon() .. its close).
  bool streaming() const ABSL_LOCKS_EXCLUDED(mu_);
  // Of the current or last closed stream; nullopt when the last block did not stream.
  std::optional<StreamStats> stream_stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // Of the current or last block's op watch; nullopt without ops.
  std::optional<OpsStats> ops_stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // The graph kept in the current or last block; null while none (or without ops).
  std::shared_ptr<const KeptOps> kept_ops() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Session(std::shared_ptr<Tracer> tracer, std::shared_ptr<flight::Recorder> recorder);

  // The record's decoration (see the file comment).
  void Decorate(TraceRecord* record) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<StreamStats> StreamStatsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the watch the layer trace's origin and, the first time a graph is kept, publishes it,
  // lets the Tracer adopt its origin and streams it once; publishes the counters. Owner thread.
  void SyncOps() ABSL_LOCKS_EXCLUDED(mu_);
  // Publishes the watch's counters for readers on other threads. Owner thread.
  void PublishOpsStats() ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const std::shared_ptr<Tracer> tracer_;
  const std::shared_ptr<flight::Recorder> recorder_;  // Null: none.

  // The op watch: owner thread only (see the file comment); replaced only between blocks.
  std::unique_ptr<ops::NanOpWatch> watch_;

  mutable absl::Mutex mu_;
  std::shared_ptr<DaemonSink> sink_ ABSL_GUARDED_BY(mu_);
  std::optional<StreamStats> closed_stream_ ABSL_GUARDED_BY(mu_);  // Of the last closed stream.
  std::unique_ptr<WatchFlusher> flusher_ ABSL_GUARDED_BY(mu_);
  std::string watch_path_ ABSL_GUARDED_BY(mu_);
  std::optional<TraceRecord> final_ ABSL_GUARDED_BY(mu_);  // Of the last finished block.
  std::shared_ptr<const KeptOps> kept_ ABSL_GUARDED_BY(mu_);
  std::optional<OpsStats> ops_stats_ ABSL_GUARDED_BY(mu_);  // nullopt without ops.
};

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_SESSION_H_
