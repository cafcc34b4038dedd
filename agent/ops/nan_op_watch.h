// Op-level NaN origin for a training loop (TraceSession(model, ops="on_nan")): records the ops of
// every step's forward with an OpRecorder (no tensors kept, NaN/Inf counts only) and keeps the op
// graph of the FIRST step where an op's output (or a graph input) held a NaN or an Inf. Later
// steps are not recorded: the first origin is what matters, and a clean step then costs nothing.
//
// A step is one root forward: BeginStep() when the model's own forward starts, EndStep() when it
// returns (the Tracer's steps: one per root call). The backward is not recorded (a NaN that first
// appears in a gradient has no op origin here; the layer trace's grad_has_nan says it).
//
// Module containment: the caller brackets each module call inside the step with
// PushModule/PopModule (the Python session's forward hooks, the libtorch door's module calls);
// the root's own pass is opened by BeginStep.
//
// A step that begins inside an operator's RecordFunction start callback (the libtorch door learns
// that a forward began from its first operator) misses that operator, whose callbacks were chosen
// before the recorder's was installed: the caller hands it over with StartOp/EndOp.
//
//   NanOpWatch watch("ResNet", "ResNet");
//   watch.AddParameter("fc.weight", w, /*buffer=*/false);    // once, before the first step
//   watch.BeginStep(step, inputs);
//   int32_t p = watch.PushModule("layer1.0", "BasicBlock", block_inputs, params);
//   ...                                                    // the forward's ops run
//   watch.PopModule(p, block_outputs);
//   watch.EndStep(outputs);
//   if (watch.kept() != nullptr) ... watch.kept()->nan_origin, watch.kept_json()
//
// Errors: nothing throws; a recorder that cannot start (another recorder active on the thread,
// e.g. tl.trace running the model inside the session) skips that step and counts it in
// skipped_steps(); the recorder's hook errors are summed in hook_errors().
//
// Thread-safety: not thread-safe; every call on the thread of the training loop. Steps begun on
// another thread than the first are ignored (RecordFunction callbacks are thread-local).
#ifndef TRACETORCH_AGENT_OPS_NAN_OP_WATCH_H_
#define TRACETORCH_AGENT_OPS_NAN_OP_WATCH_H_

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/ops/op_recorder.h"
#include "trace/op_graph.h"
#include "trace/record.h"

namespace tracetorch::ops {

// The kept step and its origin op, as plain values: what NanOrigin annotation needs, copyable to
// readers on other threads.
struct KeptOrigin {
  int64_t step = -1;
  bool has_op = false;  // False when the graph names no op (the NaN came with the input).
  std::string op;
  std::string op_func;
  std::string op_module;
  // Sets origin->op/op_func/op_module when `origin` is at `step` and names a layer (not the
  // model input) and the graph names an op; returns whether it did.
  bool Annotate(NanOrigin* origin) const;
};

class NanOpWatch {
 public:
  // `model_name` goes into the kept graph; `root_type` is the root module's class name;
  // `source` is the graph's OpGraph::source ("eager" for Python, "cpp" for the libtorch door).
  NanOpWatch(std::string model_name, std::string root_type, std::string source = "eager");
  ~NanOpWatch();
  NanOpWatch(const NanOpWatch&) = delete;
  NanOpWatch& operator=(const NanOpWatch&) = delete;

  // A parameter or buffer ops may read (a model's named_parameters()/named_buffers()). The watch
  // keeps a reference to the tensor until Reset().
  void AddParameter(std::string name, const at::Tensor& tensor, bool buffer);

  // The root forward of step `step` (0-based) begins with these (flattened) inputs. No-op once a
  // graph is kept, or while a step is open.
  void BeginStep(int64_t step, const std::vector<at::Tensor>& inputs);
  // A module call inside the open step; returns its pass, or -1 when no step is recording
  // (PopModule(-1, ...) is a no-op).
  int32_t PushModule(std::string_view path, std::string_view type,
                     const std::vector<at::Tensor>& inputs, int64_t params);
  void PopModule(int32_t pass, const std::vector<at::Tensor>& outputs);
  // The root forward returned `outputs`: stops the recorder; keeps the graph when a non-finite
  // value appeared in it, else drops it.
  void EndStep(const std::vector<at::Tensor>& outputs);
  // The root forward raised: drops the step.
  void AbortStep();
  bool recording() const { return recorder_ != nullptr; }

  // The operator whose start callback began the open step, recorded by hand: StartOp from inside
  // that callback, EndOp (with what StartOp returned) from its end callback. Null / no-op when no
  // step is recording.
  std::unique_ptr<at::ObserverContext> StartOp(const at::RecordFunction& fn);
  void EndOp(const at::RecordFunction& fn, std::unique_ptr<at::ObserverContext> ctx);

  // Forgets the kept graph and the parameters (a new `with` block).
  void Reset();

  // The kept graph (step set), or nullptr while none.
  const OpGraph* kept() const { return kept_ ? &*kept_ : nullptr; }
  // OpGraphToJson(*kept(), 0), computed once when it was kept; empty while none.
  const std::string& kept_json() const { return kept_json_; }
  // Sets origin->op/op_func/op_module from the kept graph's origin op when `origin` is at the
  // kept step; returns whether it did (kept_origin().Annotate).
  bool Annotate(NanOrigin* origin) const;
  // The kept step's origin (step -1 while none).
  KeptOrigin kept_origin() const;

  int64_t recorded_steps() const { return recorded_steps_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  int64_t hook_errors() const { return hook_errors_; }
  const std::string& first_error() const { return first_error_; }

 private:
  struct Param {
    std::string name;
    at::Tensor tensor;
    bool buffer = false;
  };
  void Finish(const std::vector<at::Tensor>* outputs);  // nullptr: aborted.

  const std::string model_name_;
  const std::string root_type_;
  const std::string source_;
  std::vector<Param> params_;
  std::unique_ptr<OpRecorder> recorder_;  // The open step's; null between steps.
  int32_t root_pass_ = -1;
  int64_t step_ = 0;
  std::optional<std::thread::id> thread_;
  std::optional<OpGraph> kept_;
  std::string kept_json_;
  int64_t recorded_steps_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t hook_errors_ = 0;
  std::string first_error_;
};

}  // namespace tracetorch::ops

#endif  // TRACETORCH_AGENT_OPS_NAN_OP_WATCH_H_
