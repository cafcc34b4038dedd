// The tracing engine of the in-process agent: one Tracer per traced session.
//
// A front door (the Python extension, later the libtorch C++/TorchScript one) declares the model's
// layers, then calls BeginCall/EndCall around every module call with the call's tensors already
// flattened out of tuples, lists, dicts and keyword arguments. The Tracer:
//  - describes each tensor (shape, dtype, device) and reduces it once per forward with the fused
//    kernel of stats.h; a tensor seen again in the same forward (a layer's output is the next
//    layer's input and its container's output) reuses the result, keyed by TensorImpl identity +
//    version counter + storage offset + sizes/strides (a weak reference pins the identity);
//  - times the call (steady clock, from the end of BeginCall to the start of EndCall);
//  - registers C++ autograd hooks for the backward: a pre-hook on the node that receives the
//    gradient of the call's first output that requires grad (start stamp, output-gradient norm,
//    mean, NaN and all-zero flags) and a pre-hook on the node that receives the gradient of its
//    first input that requires grad, captured before the call runs (end stamp, gradient at the
//    input). A call whose inputs need no gradient ends when the output's node has run (post-hook).
//    Hooks never wrap or replace tensors, so in-place ops on outputs keep working, and they return
//    the gradients they are given untouched. One hook per node serves every call that listens on
//    it;
//  - tracks where non-finite trouble first appeared (NanOrigin), by the rule of trace/nonfinite.h
//    (a NaN anywhere, an Inf outside a mask in a layer's or the model's output or in a gradient):
//    it feeds a LayerOriginFinder the root call's inputs, each layer call as it ends, the root
//    call's outputs (also measured for a root that is no layer) and each backward sample. In a
//    deferred session (below) this is decided when the calls' statistics are collected, in the
//    order the hooks ran, with the same rules: nan_origin() is known after the collection;
//  - a module call made while autograd's engine runs a backward on this thread (activation
//    checkpointing recomputing a forward) is a recomputation, not a forward: it is left out of
//    forward_count, the latencies, the layer's latest tensors and the NaN origin (no statistics
//    are computed), its backward is still measured (the recomputed graph is what the backward
//    runs through), and the session counts it (metadata extra "recomputed_calls");
//  - a tensor not on the CPU (CUDA) is reduced by ATen kernels on its device and current stream
//    into a small float64 tensor copied non-blocking to pinned host memory (deferred_stats.h), and
//    a CUDA event after the copy says when it is readable; gradients likewise. No hook waits for
//    the device. Such a session is "deferred": its forward samples (with their statistics still
//    to read), its root calls and backward samples with device gradients wait in PendingResults
//    queues (pending_results.h) and are collected once complete, in push order, at the next step
//    (root BeginCall), a Snapshot() (the watch flusher's) or Stop(). Snapshot() says how many
//    samples are still in flight (metadata extra "results_in_flight"); Stop() collects them with
//    a bounded wait (TracerOptions::stop_wait) and counts those it drops ("results_abandoned").
//    With TracerOptions::deferred_cpu, CPU tensors take the same route and the same ATen code
//    (the "copy" is the result itself), so that CI tests it;
//  - on CUDA (built with TRACETORCH_WITH_CUDA, see cuda_support.h): records the caching allocator's
//    allocated/reserved deltas per call (forward: BeginCall..EndCall; backward: output gradient
//    ready..input gradient ready; counters, no sync) and times forward calls with CUDA events,
//    read at collection. Backward latency is host time between the hooks. Without CUDA, memory
//    fields stay null;
//  - feeds a TraceAggregator (memory bounded by layers, never steps) and counts hook errors;
//  - with a flight recorder (SetFlightRecorder, flight/layout.h), writes where the process is
//    (step, phase, innermost module, since when) and each call's forward and backward span into
//    a shared-memory region the daemon reads even when the process hangs or died. The writes are
//    plain stores under the mutex the hook already holds: no extra lock, no allocation, no syscall.
//    The position's module is the innermost call open when the event happened: exact for one
//    forward thread (calls nest), approximate when several threads run forwards at once.
//
// Steps: a root call (is_root) starts a step; step = index of the root call in the session.
// Calls nest; the first call entered while no call is active starts a new "forward" and empties the
// statistics cache.
//
// Errors: no method throws. Every entry point the host program calls into (BeginCall, EndCall,
// AbortCall, the autograd hooks, the sink notifications) does its work under guest::GuardHook
// (guest/hook_guard.h): a failure there (a c10::Error from torch, an allocation failure, a sink
// that throws) is caught, logged once per cause through the "tracetorch" logger and counted
// (hook_errors(), TraceMetadata::extra["hook_errors"]), and the user's forward or backward goes on
// with its results untouched. Front doors guard their own callbacks with the same counter:
// guest::GuardHook(tracer.errors(), "pre_hook", [&] { ... }).
//
// Thread-safety: every public method is thread-safe. Forward calls may come from several threads
// and backward hooks run on autograd engine threads. A hook first reduces the call's tensors
// (BeginCall: the inputs; EndCall: the outputs; the backward hooks: the gradients) on its own
// thread, holding no lock of the Tracer but the statistics cache's (held only for a lookup or an
// insert, see stats_cache.h), then takes the internal mutex for the short bookkeeping of the call:
// no ATen call and no wait happen under that mutex, so forward threads, autograd threads and
// Snapshot() (the watch flusher's) never queue behind a reduction. Nothing waits on the GIL, so
// hooks may run with or without it. Stop() removes hooks from nodes still alive: REQUIRES no
// backward pass running concurrently with Stop().
//
// Fork: a Tracer made before fork() is inert in the child and touches no lock there (another
// thread may have held one at the fork, and that thread is gone): every hook is a no-op (gradients
// pass through untouched), BeginCall returns kNoCall, Start() and DeclareLayer() return
// FailedPrecondition, SetMetadata() and SetEventSink() do nothing, Snapshot() returns an empty
// TraceRecord (no layers, default metadata: the parent's record lives behind those locks),
// Finalize() returns FailedPrecondition, and steps(), tensor_reductions() and hook_errors() are 0
// and nan_origin() is nullopt. A Tracer created in the child works normally.
#ifndef TRACETORCH_AGENT_TRACER_H_
#define TRACETORCH_AGENT_TRACER_H_

#include <ATen/core/Tensor.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "agent/autograd_node.h"
#include "agent/cuda_support.h"
#include "agent/deferred_stats.h"
#include "agent/pending_results.h"
#include "agent/stats.h"
#include "agent/stats_cache.h"
#include "flight/layout.h"
#include "flight/reader.h"
#include "guest/fork.h"
#include "guest/hook_guard.h"
#include "trace/aggregator.h"
#include "trace/anomaly.h"
#include "trace/nonfinite.h"
#include "trace/record.h"

namespace tracetorch::flight {
class Recorder;
}

namespace tracetorch::agent {

struct TracerOptions {
  // false: only NaN/Inf counts are computed (StatsMode::kNonFiniteOnly).
  bool capture_stats = true;
  Thresholds thresholds;
  // Routes CPU forward samples through the pending-results queue as CUDA ones go: they reach the
  // record when collected (next step, Snapshot(), Stop()), not at EndCall. The Python door sets it
  // from TRACETORCH_DEFERRED_STATS=1. For tests of the deferred machinery on CPU.
  bool deferred_cpu = false;
  // With deferred_cpu: makes each CPU sample's Completion (default: a ReadyCompletion). Tests.
  std::function<std::unique_ptr<Completion>()> cpu_completion;
  // How long Stop() waits, in all, for samples still in flight before dropping them.
  absl::Duration stop_wait = absl::Seconds(2);
  // When WatchSnapshot() calls a flight recorder's position a stall (see flight/reader.h).
  flight::StallRule stall_rule;
  // Tests: called on the hook's thread before each tensor or gradient reduction, with no lock of
  // the Tracer held (a test blocks here to prove it). Must not call back into the Tracer's hooks.
  std::function<void(const at::Tensor&)> before_reduce;
};

// Receives a copy of what the Tracer records, as it is recorded: an optional second consumer next
// to the embedded TraceAggregator (the daemon stream, agent/daemon_sink.h). Additive: the Tracer's
// own record never depends on a sink.
//
// Calls come from the Tracer's hook paths (forward calls on the caller's thread, backward calls on
// autograd threads) and, in a deferred session, from whichever thread collects (a step, a
// Snapshot(), Stop()), serialised by the Tracer's internal mutex, which is HELD during the call. So
// an implementation must be quick, must never block (hand the event to a bounded queue and return)
// and must never call back into the Tracer. It must not throw. Never called in a forked child.
class EventSink {
 public:
  using LayerId = TraceAggregator::LayerId;
  virtual ~EventSink() = default;
  // A layer was declared (also replayed for every layer already declared when the sink is set).
  virtual void OnLayerDeclared(LayerId layer, const LayerInfo& info) = 0;
  // A forward/backward sample was aggregated for `layer` at `step` (the root call's index).
  virtual void OnForward(LayerId layer, int64_t step, const ForwardSample& sample) = 0;
  virtual void OnBackward(LayerId layer, int64_t step, const BackwardSample& sample) = 0;
  // The session's NaN origin was determined (at most once per Start()).
  virtual void OnNanOrigin(const NanOrigin& origin) = 0;
};

// Per-node backward bookkeeping; defined in tracer.cc.
struct NodeListeners;
struct BackwardCall;

class Tracer : public std::enable_shared_from_this<Tracer> {
 public:
  using LayerId = TraceAggregator::LayerId;
  // Identifies one call between BeginCall and EndCall/AbortCall. kNoCall: not traced.
  using CallId = int64_t;
  static constexpr LayerId kNoLayer = -1;
  static constexpr CallId kNoCall = 0;

  // InvalidArgument if the thresholds do not Validate().
  static absl::StatusOr<std::shared_ptr<Tracer>> Create(TracerOptions options,
                                                        TraceMetadata metadata);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Declares a layer (see TraceAggregator::DeclareLayer). Layers may be declared at any time;
  // FailedPrecondition in a forked child.
  absl::StatusOr<LayerId> DeclareLayer(const LayerInfo& info) ABSL_LOCKS_EXCLUDED(mu_);

  // Starts recording with a clean slate: observations, steps, NaN origin, hook errors and
  // registered backward hooks of an earlier Start() are forgotten (layers and metadata are kept).
  // FailedPrecondition if already started; also in a forked child.
  absl::Status Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Collects the samples still in flight (waiting at most TracerOptions::stop_wait, without the
  // internal mutex), then stops recording and removes the backward hooks still attached to live
  // autograd nodes. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  bool active() const ABSL_LOCKS_EXCLUDED(mu_);

  // Forward hook entry points. `layer` is the declared layer the call is recorded under, or
  // kNoLayer for a call that is only observed (the root of a model with children): it still
  // counts steps (is_root), checks the model input for NaN/Inf and feeds the statistics cache.
  // Returns kNoCall when not recording; EndCall/AbortCall accept kNoCall and do nothing.
  CallId BeginCall(LayerId layer, bool is_root, absl::Span<const at::Tensor> inputs)
      ABSL_LOCKS_EXCLUDED(mu_);
  void EndCall(CallId call, absl::Span<const at::Tensor> outputs) ABSL_LOCKS_EXCLUDED(mu_);
  // EndCall with the call's end given: for a front door that learns a call ended only after the
  // fact (the libtorch door closes a module call at the next operator, and passes the end of the
  // call's last operator). `end` must not precede the call's BeginCall.
  void EndCall(CallId call, absl::Span<const at::Tensor> outputs,
               std::chrono::steady_clock::time_point end) ABSL_LOCKS_EXCLUDED(mu_);
  // The call raised: forget it without recording a sample.
  void AbortCall(CallId call) ABSL_LOCKS_EXCLUDED(mu_);

  // The trace so far, without anomalies: the samples collected so far (those whose device work has
  // completed are collected first; nothing waits). Metadata carries nan_origin and
  // extra["hook_errors"] and, once a sample was deferred (CUDA, deferred_cpu),
  // extra["results_in_flight"] (samples still waiting for the device) and
  // extra["results_abandoned"] (samples Stop() dropped after its bounded wait).
  TraceRecord Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  // Snapshot() with total_time_ms set and `warnings` = DetectAnomalies(record, thresholds).
  absl::StatusOr<TraceRecord> Finalize(std::optional<double> total_time_ms) const
      ABSL_LOCKS_EXCLUDED(mu_);

  void SetMetadata(TraceMetadata metadata);
  const TracerOptions& options() const { return options_; }

  // Sets (or, with nullptr, removes) the sink that receives every declaration, sample and NaN
  // origin from now on; layers already declared are replayed to it first. The Tracer keeps a
  // reference until the sink is replaced. No-op in a forked child.
  void SetEventSink(std::shared_ptr<EventSink> sink) ABSL_LOCKS_EXCLUDED(mu_);

  // Sets (or, with nullptr, removes) the flight recorder the hooks write to from now on; the names
  // of the layers already declared are written to it first, and its recording flag follows
  // active(). One Tracer writes a recorder at a time. No-op in a forked child.
  void SetFlightRecorder(std::shared_ptr<flight::Recorder> recorder) ABSL_LOCKS_EXCLUDED(mu_);
  // A front door that knows the phase (the optimizer's step) moves the position there; ignored
  // while not recording or without a recorder.
  void MarkPhase(flight::Phase phase) ABSL_LOCKS_EXCLUDED(mu_);
  // Snapshot() plus, with a flight recorder while recording, where the process is in
  // metadata.extra: "flight_position" ("step 12, forward, in fc1"), "flight_position_age_s"
  // (seconds since it last moved) and "flight_stalled" ("true" once that age passes
  // TracerOptions::stall_rule's threshold). What the watch file shows.
  TraceRecord WatchSnapshot() const ABSL_LOCKS_EXCLUDED(mu_);

  // The session's hook error counter (reset by Start()), for the front doors' own callbacks:
  //   guest::GuardHook(tracer->errors(), "post_hook", [&] { ... });
  //   tracer->errors().Record("finalize", status.ToString());
  guest::HookErrors& errors() { return errors_; }
  // Hook failures since Start() (what metadata.extra["hook_errors"] says).
  int64_t hook_errors() const;
  // Root calls begun since Start() (the number of forward passes).
  int64_t steps() const ABSL_LOCKS_EXCLUDED(mu_);
  // Tensors reduced (statistics computed) since Start(); cache hits are not counted (two threads
  // that race on one uncached tensor may both reduce it: both count). Lock-free.
  int64_t tensor_reductions() const;
  std::optional<NanOrigin> nan_origin() const ABSL_LOCKS_EXCLUDED(mu_);
  // The op level's origin (ops::NanOpWatch::Resolve): taken as the session's NaN origin when it
  // has none yet (trouble the layers did not see), or its op fields when it is the same origin
  // (LayerOriginFinder::Adopt); the sink is told. Returns whether the origin changed. No-op in a
  // forked child.
  bool AdoptNanOrigin(NanOrigin origin) ABSL_LOCKS_EXCLUDED(mu_);
  // Forward and backward samples waiting for their device work (not yet in the record).
  // Lock-free.
  int64_t results_in_flight() const;

  // Backward entry points, called by the hooks this class registers (public for them only).
  // Guarded like the forward ones: they never throw into the autograd engine.
  void OnGradReady(NodeListeners& node, const std::vector<at::Tensor>& grads)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnNodeDone(NodeListeners& node) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Clock = std::chrono::steady_clock;

  struct CallState {
    LayerId layer = kNoLayer;
    bool is_root = false;
    bool recompute = false;  // Made by autograd's engine during a backward (checkpointing).
    bool in_use = false;
    uint32_t generation = 0;
    std::vector<TensorInfo> inputs;
    // Beside `inputs` (deferred sessions): the statistics the device is still computing (null:
    // already in `inputs`).
    std::vector<std::shared_ptr<DeferredStats>> input_stats;
    int64_t step = 0;
    uint64_t seq = 0;           // Order of BeginCall among the session's calls.
    LayerId parent = kNoLayer;  // The call open around it when it began (the flight position).
    Clock::time_point start;
    // Gradient edge of the first input that requires grad, captured before the call ran.
    NodePtr input_node;
    uint32_t input_nr = 0;
    // CUDA only (see cuda_support.h): memory before the call and event timing.
    std::optional<c10::Device> cuda_device;
    std::optional<DeviceMemory> mem_before;
    std::unique_ptr<DeviceTimer> timer;
  };

  // A forward sample waiting for its device work (statistics, a CUDA call's end event; a CPU
  // sample in the deferred mode) before it is aggregated, or a root call's begin/end: what the
  // NaN origin is decided from, at collection, in push order.
  struct PendingForward {
    enum class Kind : uint8_t {
      kSample,     // A declared layer's call (counted in results_in_flight).
      kRootBegin,  // A root call's inputs (sample.inputs): the model input check.
      kRootEnd     // A root call ended: the fallback origin of its forward.
    };
    Kind kind = Kind::kSample;
    uint64_t epoch = 0;  // Of the Start() it belongs to.
    LayerId layer = kNoLayer;
    int64_t step = 0;
    uint64_t seq = 0;
    bool is_root = false;
    ForwardSample sample;
    // Beside sample.inputs/outputs: statistics still on the device (null: already there).
    std::vector<std::shared_ptr<DeferredStats>> input_stats;
    std::vector<std::shared_ptr<DeferredStats>> output_stats;
    std::unique_ptr<DeviceTimer> timer;  // CUDA only: latency from its events.
  };
  // A backward sample waiting for its gradients' statistics.
  struct PendingBackward {
    uint64_t epoch = 0;
    LayerId layer = kNoLayer;
    int64_t step = 0;
    BackwardSample sample;
    std::shared_ptr<DeferredStats> out;  // The output gradient's (null: none or in `sample`).
    std::shared_ptr<DeferredStats> in;   // The input gradient's.
  };
  // The cached statistics of one tensor: on the host, or still on the device.
  struct CachedStats {
    TensorStats ready;
    std::shared_ptr<DeferredStats> deferred;  // Non-null: `ready` is unset.
  };

  // What BeginCall learns from a call's inputs before it takes mu_.
  struct InputScan {
    std::vector<TensorInfo> infos;  // Kept only for a declared layer or a root call.
    std::vector<std::shared_ptr<DeferredStats>> stats;  // Beside `infos` (null: in `infos`).
    NodePtr input_node;
    uint32_t input_nr = 0;
    std::optional<c10::Device> cuda_device;
    std::optional<DeviceMemory> mem_before;
    std::unique_ptr<DeviceTimer> timer;
  };
  // What EndCall learns from a call's outputs before it takes mu_.
  struct OutputScan {
    std::vector<TensorInfo> infos;
    std::vector<std::shared_ptr<DeferredStats>> stats;  // Beside `infos` (null: in `infos`).
    const at::Tensor* grad_output = nullptr;            // The first output that requires grad.
    std::optional<c10::Device> cuda_device;
    std::optional<DeviceMemory> mem_after;
  };

  Tracer(TracerOptions options, TraceMetadata metadata);

  bool ForkedChild() const { return fork_owner_.InForkedChild(); }
  // Takes a free call slot for a new call and resets it; kNoCall when too many calls are open.
  CallId OpenCall(LayerId layer, bool is_root, bool recompute) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Describes the call's inputs (a recomputation's only for its gradient edge) and captures the
  // gradient edge, the CUDA memory and timer. Without mu_.
  InputScan ScanInputs(LayerId layer, bool is_root, bool recompute,
                       absl::Span<const at::Tensor> inputs) ABSL_LOCKS_EXCLUDED(mu_);
  // Describes the call's outputs (`describe` false: only finds the output the backward starts
  // from). Without mu_.
  OutputScan ScanOutputs(absl::Span<const at::Tensor> outputs, bool describe)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the inputs' scan into the call (NaN origin bookkeeping); then starts the clock.
  void RecordInputs(CallState& c, InputScan scan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the forward sample of `c` (outputs, NaN origin, backward hooks).
  void CloseCall(CallState& c, OutputScan scan, Clock::time_point end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls `fn(*sink_)` if there is a sink, under the guard (a sink must not throw; if it does, it
  // is counted).
  void NotifySink(std::string_view cause, absl::FunctionRef<void(EventSink&)> fn) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `t`'s statistics are computed on its device and collected later (a non-CPU tensor;
  // every tensor with deferred_cpu).
  bool Defers(const at::Tensor& t) const { return options_.deferred_cpu || !t.device().is_cpu(); }
  // Describes `t`, reducing it unless this forward already did. Without mu_. For a tensor that
  // Defers(), the statistics are launched and `*deferred` says where they will be (the info's
  // are unset); otherwise `*deferred` is null.
  TensorInfo Describe(const at::Tensor& t, std::shared_ptr<DeferredStats>* deferred)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The statistics of one gradient, on the host (nullopt: undefined or failed, counted) or, when
  // it Defers(), launched into `*deferred`. Without mu_.
  std::optional<GradStats> ReduceGrad(const at::Tensor& grad,
                                      std::shared_ptr<DeferredStats>* deferred)
      ABSL_LOCKS_EXCLUDED(mu_);
  CallState* FindCall(CallId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseCall(CallId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns the listener set of `node`, attaching our pre-hook (and post-hook if asked) once.
  std::shared_ptr<NodeListeners> ListenersFor(const NodePtr& node, bool need_post_hook)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RegisterBackward(CallState& call, const at::Tensor& output)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DetachHooks() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the sink the origin when a feed of origin_finder_ just decided it (`found`).
  void NoteOrigin(bool found) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands a forward sample to the sink, then aggregates it.
  absl::Status AddForwardSample(LayerId layer, int64_t step, ForwardSample sample) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Aggregates a backward sample, then hands it to the sink; counts a failure.
  void AddBackwardSample(LayerId layer, int64_t step, const BackwardSample& sample) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The hooks' work (tracer_backward.cc). GradReady: the gradients' statistics by slot of the
  // node's inputs (computed before the lock; a slot missing there has none) and the device memory
  // sampled then; under the lock and the guard.
  struct SlotGradStats {
    uint32_t nr = 0;
    std::optional<GradStats> ready;
    std::shared_ptr<DeferredStats> deferred;
  };
  // Under mu_: the slots of `grads` whose statistics a listener of `node` needs now.
  std::vector<uint32_t> NeededGradSlots(const NodeListeners& node,
                                        const std::vector<at::Tensor>& grads) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GradReadyLocked(NodeListeners& node, const std::vector<at::Tensor>& grads,
                       const std::vector<SlotGradStats>& stats,
                       const std::optional<DeviceMemory>& memory, Clock::time_point enter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `memory`: sampled before the lock on the device of the calls that end here (nullopt: none).
  void NodeDoneLocked(NodeListeners& node, const std::optional<DeviceMemory>& memory,
                      Clock::time_point end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_: the CUDA device of a call that would end at `node` (memory to sample first).
  std::optional<c10::Device> NodeDoneDevice(const NodeListeners& node) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  TraceRecord SnapshotLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A backward call's span, ended at `end`, with flight::kSpanNonFinite when a gradient had a NaN.
  void FlightSpan(const BackwardCall& bc, Clock::time_point end, uint32_t flags)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The flight recorder's side of a call's end (or abort): its span, with these flags
  // (flight::kSpanNonFinite; nullopt: no span, the call raised or was not scanned), and the
  // position back in the enclosing call.
  void FlightExit(const CallState& c, Clock::time_point end, std::optional<uint32_t> span_flags)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The deferred half (tracer_deferred.cc). Queues the forward sample of a call in a deferred
  // session (device statistics or timing still running; every sample with deferred_cpu).
  void DeferForward(CallState& c, ForwardSample sample,
                    std::vector<std::shared_ptr<DeferredStats>> output_stats)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a root call's begin (with its inputs, the model input check) or end (with its
  // outputs), in a deferred session; not counted in results_in_flight. `stats`: beside `tensors`.
  void PushRootMarker(const CallState& c, PendingForward::Kind kind,
                      std::vector<TensorInfo> tensors,
                      std::vector<std::shared_ptr<DeferredStats>> stats)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a backward sample whose gradient statistics are on the device.
  void DeferBackward(const BackwardCall& bc, BackwardSample sample,
                     std::shared_ptr<DeferredStats> in) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One collected forward entry: the NaN origin logic, then the aggregate.
  void ApplyForward(PendingForward& p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Aggregates results taken from the queues (their device work is done), in push order; those
  // of an earlier Start() are dropped. Reads the host copies and event times, then takes mu_.
  void CollectPending(std::vector<PendingForward> forward,
                      std::vector<PendingBackward> backward) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(collect_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // Collects what has completed, never waiting (skipped while another thread collects).
  void CollectCompleted() const ABSL_LOCKS_EXCLUDED(collect_mu_, mu_);
  // Collects everything, waiting until `deadline` at most; counts what it drops.
  void CollectAll(absl::Time deadline) ABSL_LOCKS_EXCLUDED(collect_mu_, mu_);

  // Constant after construction.
  const TracerOptions options_;
  const StatsMode stats_mode_;
  const guest::ForkOwner fork_owner_;  // Inert in a forked child (see above).

  // Thread-safe themselves; mutable so that const snapshots can first drain pending CUDA samples
  // (and count a failing sink while doing so).
  mutable TraceAggregator aggregator_;
  mutable guest::HookErrors errors_;
  // Its own small mutex, never held while reducing (see stats_cache.h). Emptied when a forward
  // begins (the first call while no call is open) and at Start()/Stop().
  StatsCache<CachedStats> stats_cache_;
  // Mirrors of active_ and active_calls_ (written under mu_), read by the hooks before they take
  // it: a hook of a stopped Tracer reduces nothing, and a new forward empties the cache first.
  std::atomic<bool> recording_{false};
  std::atomic<int32_t> open_calls_{0};
  // Set by Start() with deferred_cpu and by a hook that defers a statistic or a timing: from then
  // on the session's samples and root calls go through the queue (in order), and the NaN origin
  // is decided at collection. Read under mu_ after the hook's own writes.
  std::atomic<bool> deferring_{false};
  // Tensors reduced since Start() (cache hits not counted; two threads racing on one tensor may
  // both reduce it, and both count).
  std::atomic<int64_t> tensor_reductions_{0};

  // Serialises collectors, so that results leave the queues and reach the record in push order.
  // Held while taking from the queues and applying (then mu_ too); Stop() holds it while it
  // waits, and other collectors skip (TryLock) rather than wait.
  mutable absl::Mutex collect_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  bool active_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;  // Start() count; stale backward hooks compare it.
  std::vector<std::string> layer_names_ ABSL_GUARDED_BY(mu_);               // full_name by LayerId.
  std::vector<std::optional<LayerInfo>> layer_infos_ ABSL_GUARDED_BY(mu_);  // For sink replay.
  std::shared_ptr<EventSink> sink_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<flight::Recorder> recorder_ ABSL_GUARDED_BY(mu_);
  LayerId forward_layer_ ABSL_GUARDED_BY(mu_) = kNoLayer;  // Innermost open call (flight position).
  std::vector<CallState> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> free_calls_ ABSL_GUARDED_BY(mu_);
  int32_t active_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t recomputed_calls_ ABSL_GUARDED_BY(mu_) = 0;  // Since Start().
  // The NaN origin (trace/nonfinite.h). Mutable: a deferred session decides it at collection,
  // which const snapshots do.
  mutable LayerOriginFinder origin_finder_ ABSL_GUARDED_BY(mu_);
  uint64_t call_seq_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<const torch::autograd::Node*, std::weak_ptr<NodeListeners>> nodes_
      ABSL_GUARDED_BY(mu_);
  size_t prune_nodes_at_ ABSL_GUARDED_BY(mu_);
  // Thread-safe itself, with its own mutex: pushed under mu_, taken without it (see
  // pending_results.h); mutable so that Snapshot() collects what has completed.
  mutable PendingResults<PendingForward> pending_;
  mutable PendingResults<PendingBackward> pending_backward_;
  std::atomic<int64_t> results_abandoned_{0};          // Dropped by Stop() after its bounded wait.
  int64_t results_deferred_ ABSL_GUARDED_BY(mu_) = 0;  // Samples queued since Start().
};

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_TRACER_H_
