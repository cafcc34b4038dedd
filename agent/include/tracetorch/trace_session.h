// The libtorch front door of tracetorch: trace a TorchScript module (torch::jit::Module) or a
// C++-frontend module (torch::nn::Module) in a program without Python.
//
// libtorch's C++ modules have no forward hooks, so a session captures ATen operators with
// thread-local at::RecordFunction callbacks and attributes each one to a module:
//  - TorchScript: exactly, from the interpreter's module hierarchy of the running instruction
//    (residual adds and other inline code included). Calls, latency, tensors and statistics are
//    those of each module call.
//  - C++ frontend: an operator that takes a parameter or buffer belongs to the module that owns it
//    (and to that module's ancestors). A module call spans from its first to its last such
//    operator; consecutive runs merge. Parameter-free modules (ReLU, Dropout, pooling, a residual
//    add in a block's forward) get no call of their own unless their forward() holds a
//    ModuleScope, which gives exact boundaries. See docs/cpp.md for the rules.
// The record, JSON, anomalies and NaN origin are the ones the Python front door produces: both
// are adapters over the same session engine (agent/session.h), which wires the tracer, the daemon
// stream, the watch file and the op watch in one order.
//
// Example (TorchScript):
//   torch::jit::Module model = torch::jit::load("model.pt");
//   tracetorch::TraceSessionOptions options;
//   options.model_name = "resnet";
//   absl::StatusOr<std::unique_ptr<tracetorch::TraceSession>> session =
//       tracetorch::TraceSession::Create(model, options);
//   if (!session.ok()) return session.status();
//   {
//     tracetorch::ScopedTrace trace(**session);  // Start() now, Stop() at the end of the block.
//     for (auto& batch : batches) model.forward({batch});
//   }
//   std::cout << (*session)->Summary();
//   absl::Status s = (*session)->Export("trace.json");
//
// Threads: callbacks are installed on the thread that calls Start() and see only the operators of
// that thread (and the backward pass it runs); other threads' work is not traced, and nothing is
// installed while no session is active. Start() and Stop() must be called on the same thread; the
// result accessors may be called from any thread.
//
// Errors: nothing here throws. API errors are absl::Status; failures inside callbacks are counted
// in the record's metadata "hook_errors" and logged once per cause.
#ifndef TRACETORCH_TRACE_SESSION_H_
#define TRACETORCH_TRACE_SESSION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trace/anomaly.h"
#include "trace/record.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit
namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace tracetorch {

namespace libtorch_internal {
class CaptureEngine;
}  // namespace libtorch_internal

// Op-level capture inside a session (the Python TraceSession's ops=).
enum class OpCapture {
  kOff,
  // ops="on_nan": every forward pass (step) is also recorded op by op with the engine of
  // TraceOps (trace_ops.h), keeping no tensors and only the NaN/Inf counts of each op's output,
  // and dropped when it ends. The op graph of the FIRST step in which non-finite trouble matters
  // (trace/nonfinite.h: a NaN, or an Inf outside a mask that reaches a module's or the model's
  // output; an attention mask's -inf that softmax absorbs is none) is kept in the record
  // (TraceRecord::op_graph; "op_graph" in the exported JSON, the trace/op_graph_json.h
  // document) and metadata.nan_origin names the op where it entered (op, op_func, op_module); later
  // steps are not recorded. A NaN first born in a backward: the layer trace names its layer and
  // the graph of that step is kept (its origin op: the first op of that layer whose forward
  // output held a value the forward absorbed, when there is one). The
  // ops follow the session's module calls: a step is the root call (for a C++-frontend model,
  // the forward pass as the rules above delimit it: without a ModuleScope on the root, operators
  // between the last attributed one and the backward, the loss, belong to it), each other call is
  // a module pass. The backward is not recorded.
  kOnNan,
};

// Mirrors the keyword arguments of the Python TraceSession.
struct TraceSessionOptions {
  // false: only NaN/Inf counts are computed (NaN detection keeps working, cheaply).
  bool capture_stats = true;
  // Recorded in the metadata; empty: the module's class name.
  std::string model_name;
  Thresholds thresholds;
  // When set, the trace so far is written there (atomically) every `watch_interval`, and once more,
  // with anomalies, at Stop().
  std::string watch_path;
  absl::Duration watch_interval = absl::Seconds(1);  // At least 100 ms.
  // When set (a socket path or unix:// address), each Start()..Stop() block is also streamed to
  // tracetorchd there. Never waits for the daemon: when it is away the events are dropped and
  // counted (record().metadata.extra["dropped_events"]), and the embedded record is otherwise
  // unaffected. Stop() waits at most 1 s for the stream's end.
  std::string daemon_address;
  // Op-level NaN origin (see OpCapture); streamed to the daemon once, when kept.
  OpCapture ops = OpCapture::kOff;
};

class TraceSession {
 public:
  // Creates a session over `module`; nothing is traced until Start(). The module must outlive the
  // session. Layers are the module's named submodules (a module without submodules records
  // itself). InvalidArgument for bad options (thresholds, watch interval, a malformed daemon
  // address).
  static absl::StatusOr<std::unique_ptr<TraceSession>> Create(const torch::jit::Module& module,
                                                              TraceSessionOptions options = {});
  static absl::StatusOr<std::unique_ptr<TraceSession>> Create(const torch::nn::Module& module,
                                                              TraceSessionOptions options = {});

  TraceSession(const TraceSession&) = delete;
  TraceSession& operator=(const TraceSession&) = delete;
  // Stops the session if it is active (see Stop()). On another thread than Start() the callbacks,
  // which only that thread can remove, are made inert instead (see Threads above).
  ~TraceSession();

  // Starts a clean trace on the calling thread. FailedPrecondition if this session is already
  // active, was abandoned (destroyed while active on another thread), another session is active
  // on this thread, or in a child forked after Create(); Internal if the operator callbacks cannot
  // be installed. The watch file is first written one interval later (its failures are counted
  // and logged by the flusher, see agent/watch_flusher.h), and the daemon is never waited for.
  absl::Status Start();
  // Stops tracing, finalises the record (anomalies, total time) and writes the final watch file.
  // Idempotent. FailedPrecondition when called on another thread than Start() (the session keeps
  // running then; stop it from its own thread); the final watch write's error (NotFound,
  // PermissionDenied, ResourceExhausted, ...) otherwise, also counted in hook_errors(); the record
  // is finished either way.
  absl::Status Stop();
  bool active() const;

  // The finished record (after Stop()), or the trace so far while active.
  TraceRecord record() const;
  // The anomalies of record().
  std::vector<Anomaly> anomalies() const;
  // Writes record() as JSON (atomically), in the layout `tracetorch inspect` reads.
  absl::Status Export(const std::string& path) const;
  // A short text report: model, layers, forward passes, parameters, time, NaN origin, anomalies.
  std::string Summary() const;

  // Forward passes (root calls) of the current or last trace.
  int64_t steps() const;

  // With ops = kOnNan: the op graph kept in the current or last trace (record().op_graph) as the
  // trace/op_graph_json.h document, minified (ParseOpGraphJson reads it); empty while none.
  std::string op_graph_json() const;
  // With ops = kOnNan: steps recorded op by op, and steps skipped because another op capture
  // (TraceOps) was active on the thread. Zero without ops.
  struct OpsStats {
    int64_t recorded_steps = 0;
    int64_t skipped_steps = 0;
  };
  OpsStats ops_stats() const;
  // Failures counted inside callbacks (also in record().metadata.extra["hook_errors"]).
  int64_t hook_errors() const;

 private:
  struct Impl;
  explicit TraceSession(std::unique_ptr<Impl> impl);
  static absl::StatusOr<std::unique_ptr<TraceSession>> Finish(std::unique_ptr<Impl> impl,
                                                              const TraceSessionOptions& options);
  std::unique_ptr<Impl> impl_;
};

// RAII: Start() on construction, Stop() on destruction.
//   tracetorch::ScopedTrace trace(*session);
//   if (!trace.status().ok()) ...
class ScopedTrace {
 public:
  explicit ScopedTrace(TraceSession& session);
  ~ScopedTrace();
  ScopedTrace(const ScopedTrace&) = delete;
  ScopedTrace& operator=(const ScopedTrace&) = delete;
  // The result of Start(); when not ok, the destructor does nothing.
  const absl::Status& status() const { return status_; }

 private:
  TraceSession& session_;
  absl::Status status_;
};

// Exact attribution for a C++-frontend module call: put one at the top of a forward().
//
//   torch::Tensor BlockImpl::forward(torch::Tensor x) {
//     tracetorch::ModuleScope scope(*this);     // This module's call, exactly.
//     auto y = torch::relu(conv1(x));
//     { tracetorch::ModuleScope add(*this, "residual");  // A custom block, recorded as a layer
//       y = y + x; }                                       // "<this module>.residual".
//     return y;
//   }
//
// Every operator run while the scope lives belongs to that module (or, when it takes a parameter
// of one of its descendants, to that descendant); the call spans from the first to the last such
// operator and ends when the scope ends. A scope on the root module also marks the forward pass:
// operators outside any scope are then ignored (an L2 penalty computed from weights, say).
//
// Costs one thread-local read when no session is active on this thread, and does nothing for
// modules that are not part of the traced model or for TorchScript sessions. Never throws.
// REQUIRES: destroyed on the thread that created it, in LIFO order with other scopes.
class ModuleScope {
 public:
  explicit ModuleScope(const torch::nn::Module& module);
  explicit ModuleScope(const torch::nn::Module* module);
  ModuleScope(const torch::nn::Module& module, std::string_view block_name);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  libtorch_internal::CaptureEngine* engine_ = nullptr;
  uint64_t epoch_ = 0;
  int32_t token_ = -1;
};

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_SESSION_H_
