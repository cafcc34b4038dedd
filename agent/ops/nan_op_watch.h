// Op-level NaN origin for a training loop (TraceSession(model, ops="on_nan")): records the ops of
// every step's forward with an OpRecorder (no tensors kept, NaN/Inf counts only) and keeps the op
// graph of the FIRST step where non-finite trouble mattered (trace/nonfinite.h: a NaN anywhere, or
// an Inf outside a mask that reached a module's or the model's output). A step whose non-finite
// values were all masks or absorbed (the -inf of an attention mask turned into zeros by softmax)
// is a clean step: it is dropped and recording goes on. Later steps are not recorded once a graph
// is kept: the first origin is what matters, and a clean step then costs nothing.
//
// A step is one root forward: BeginStep() when the model's own forward starts, EndStep() when it
// returns (the Tracer's steps: one per root call). The backward is not recorded. Trouble first
// born in a gradient is found by the layer trace (a NanOrigin with `backward`); the watch keeps
// the latest step's graph until the next step begins, and NoteLayerOrigin() with such an origin
// keeps that graph and names, as its origin op, the first op of the origin layer whose forward
// output held a non-finite value that was absorbed (log(0) inside a `where`: its backward is
// 0 x inf = NaN); no op when there was none.
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
//   watch.TakeReport(tracer.nan_origin());                  // before each step and at the end
//   watch.BeginStep(step, inputs);
//   int32_t p = watch.PushModule("layer1.0", "BasicBlock", block_inputs, params);
//   ...                                                    // the forward's ops run
//   watch.PopModule(p, block_outputs);
//   watch.EndStep(outputs);
//   if (auto report = watch.TakeReport(tracer.nan_origin())) stream(*report, watch.kept_json());
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
  // The origin op's innermost module path ("blocks.1.mlp"; NanOrigin::kModelCode for the root's
  // own code), or NanOrigin::kModelInput when the trouble came with the input.
  std::string layer;
  bool is_nan = true;     // The trouble the graph kept for was a NaN (else an Inf).
  bool backward = false;  // Kept for a layer origin in the backward (NoteLayerOrigin).
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

  // Tells the watch the layer trace's origin so far (nullopt: none). An origin in the backward at
  // the step whose graph the watch still holds (the latest recorded one) keeps that graph (see
  // above). Call it before each BeginStep and when the session ends. No-op once a graph is kept.
  void NoteLayerOrigin(const std::optional<NanOrigin>& origin);

  // The origin the record should carry, given the layer trace's (`layer_origin`): that one with
  // the kept step's op named (Annotate); or, when the layer trace has none but a graph was kept
  // (a NaN absorbed inside a module never reaches a module's output), the kept graph's own origin
  // with its op's innermost module as the layer; else nullopt.
  std::optional<NanOrigin> Resolve(const std::optional<NanOrigin>& layer_origin) const;

  // What a front door calls before each step, after each step and when the session ends, with
  // the layer trace's origin so far: notes it (NoteLayerOrigin) and, the first time a graph is
  // kept, returns the origin to report with it (Resolve; inner nullopt: none); nullopt otherwise.
  // The door then adopts that origin into the layer trace when it has none
  // (Tracer::AdoptNanOrigin) and streams kept_json() with it once.
  std::optional<std::optional<NanOrigin>> TakeReport(const std::optional<NanOrigin>& layer_origin);

  // Forgets the kept graph and the parameters (a new `with` block).
  void Reset();

  // The kept graph (step set), or nullptr while none.
  const OpGraph* kept() const { return kept_.get(); }
  // The same, shared: what a record holds (TraceRecord::op_graph); immutable, so it outlives a
  // Reset().
  std::shared_ptr<const OpGraph> kept_graph() const { return kept_; }
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
  // Keeps `graph` (its nan_origin set) as the origin step's.
  void Keep(OpGraph graph, bool backward);

  std::shared_ptr<const OpGraph> kept_;
  bool kept_backward_ = false;
  bool reported_ = false;  // TakeReport() returned the kept graph's report.
  bool kept_is_nan_ = true;
  std::string kept_layer_;  // The layer origin a backward-kept graph was kept for.
  std::string kept_json_;
  // The latest recorded step's graph, held until the next step begins, for a NaN the backward of
  // that step makes (NoteLayerOrigin); only when an op output held a non-finite value.
  std::optional<OpGraph> previous_;
  int64_t recorded_steps_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t hook_errors_ = 0;
  std::string first_error_;
};

}  // namespace tracetorch::ops

#endif  // TRACETORCH_AGENT_OPS_NAN_OP_WATCH_H_
