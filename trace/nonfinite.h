// What counts as non-finite trouble, and where it came from: the one rule the layer trace, the op
// trace (TraceSession(ops="on_nan"), tl.trace), the audit and the daemon all apply.
//
// The rule:
//   A NaN is always trouble. An Inf (+Inf or -Inf) is trouble only where it matters: in a module's
//   output that is not a mask, in the model's output, in a gradient. A mask is a tensor with no NaN
//   and no +Inf whose finite elements are all 0: 0 where attention may look, -inf where it may not,
//   as nn.Transformer.generate_square_subsequent_mask(T) returns. So the -inf of a causal or
//   padding mask, and the -inf that an added mask, masked_fill or where put into attention scores
//   before softmax turns them into zeros, are no anomaly; a module that returns such scores (-inf
//   beside non-zero finite values) does report them.
//
//   Origin: from the first place where trouble mattered, walk back through the tensors that carry
//   trouble (a NaN, or an Inf outside a mask) to the first layer, or op, whose inputs carried none.
//   Trouble that reaches a model input first is "<input>"; trouble first made by the model's own
//   code outside its layers is "<root>". Trouble first born in the backward is located at the
//   first layer, in backward order, whose output gradient was finite and whose input gradient was
//   not ("<loss>" when a gradient held it before any layer's backward ran).
//
// The facts (trace/record.h): a tensor's nan_count, inf_count, neg_inf_count (how many Infs are
// -Inf) and finite_all_zero. Readers of files or streams that do not carry the last two
// (tracetorch-ml, older agents) get 0 and false: every Inf then is outside a mask, which keeps
// such files' meaning (their inf_activation findings are unchanged).
//
// Limits: a fault that turns a tensor into exactly 0 and -inf looks like a mask; it is reported
// where it next turns into a NaN or reaches something that matters. At the layer level the walk
// back follows the order calls ended, not data flow (modules do not say which input fed which
// output); the op level follows data flow.
//
// Thread-compatible: pure functions, and LayerOriginFinder is a plain value the caller guards.
#ifndef TRACETORCH_TRACE_NONFINITE_H_
#define TRACETORCH_TRACE_NONFINITE_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "trace/aggregator.h"
#include "trace/op_graph.h"
#include "trace/record.h"

namespace tracetorch {

// A tensor whose non-finite values are a mask's: at least one Inf, every Inf is -Inf, no NaN, and
// every finite element is 0.
bool IsMask(const TensorInfo& t);
bool IsMaskCounts(int64_t nan_count, int64_t inf_count, int64_t neg_inf_count,
                  bool finite_all_zero);

// A tensor that carries trouble: a NaN, or an Inf outside a mask.
bool CarriesTrouble(const TensorInfo& t);
bool AnyTrouble(const std::vector<TensorInfo>& tensors);
bool AnyNan(const std::vector<TensorInfo>& tensors);

// A gradient carries trouble when it holds a NaN or its norm is not finite (an Inf).
bool GradTrouble(bool has_nan, const std::optional<double>& norm);

// A layer's activation findings: its outputs held a NaN, or an Inf outside a mask.
bool ActivationTrouble(const LayerTrace& layer);

// ---- The op level -------------------------------------------------------------------------------

// Where trouble mattered in one captured forward (an OpGraph with output statistics, nonfinite
// counts suffice).
struct OpTrouble {
  // The first op, in execution order, where trouble mattered: an output with a NaN, or an output
  // with an Inf outside a mask that is a module pass's output or the model's.
  std::optional<int32_t> mattered;
  // Where it entered: walking back from `mattered` through the inputs that carried trouble, the
  // earliest op whose tensor inputs carried none (parameters and tensors made outside the traced
  // ops count as clean: a NaN weight makes the op that reads it the origin). Unset when the walk
  // reached a graph input (then `input` is set) or when nothing mattered.
  std::optional<int32_t> origin;
  // A graph input that carried trouble into what mattered, or that held a NaN (index into
  // OpGraph::inputs).
  std::optional<int32_t> input;
  // Ops with any NaN/Inf in an output (masks and absorbed values included).
  int32_t nonfinite_ops = 0;

  bool matters() const { return mattered.has_value() || input.has_value(); }
};

OpTrouble FindOpTrouble(const OpGraph& graph);

// ---- The layer level ----------------------------------------------------------------------------

// The rule over a stream of layer calls: a keeper feeds it, per step, the root call's begin, each
// layer call as it ends, the root call's end, and each backward sample as it completes; it decides
// the run's first NanOrigin. Each feed returns true when it just decided the origin (at most once
// until Reset()).
//
//   LayerOriginFinder f;
//   f.RootBegin(step, model_inputs);
//   f.CallEnd("blocks.0.mlp", step, seq, call_inputs, call_outputs);   // in the order calls end
//   if (f.RootEnd(step, model_outputs)) notify(*f.origin());
class LayerOriginFinder {
 public:
  bool RootBegin(int64_t step, const std::vector<TensorInfo>& inputs);
  // `seq`: the call's begin order in the session (the fallback origin is the first call, in begin
  // order, that received trouble).
  bool CallEnd(std::string_view layer, int64_t step, uint64_t seq,
               const std::vector<TensorInfo>& inputs, const std::vector<TensorInfo>& outputs);
  // `outputs`: the model's outputs (empty when the keeper did not measure them).
  bool RootEnd(int64_t step, const std::vector<TensorInfo>& outputs);
  // A backward sample, in completion order. A layer whose output gradient was finite and whose
  // input gradient was not is the origin at once; a troubled output gradient is held until an
  // enclosing layer completes that way (the trouble was made in its own code, outside the inner
  // layer), else until EndBackward() (or the next RootBegin) makes it "<loss>".
  bool Backward(std::string_view layer, int64_t step, const BackwardSample& sample);
  // The backward of the step is over: a troubled gradient no layer made is the loss's.
  bool EndBackward();
  // An origin found by another finder of the same run (the op level): taken when none is known
  // yet (trouble that never reached a layer's boundary: a NaN absorbed inside a module), or, when
  // it is the known origin (same layer, step and pass) naming its op, the op fields taken from
  // it. Returns whether the origin changed.
  bool Adopt(NanOrigin origin);

  const std::optional<NanOrigin>& origin() const { return origin_; }
  void Reset() { *this = LayerOriginFinder(); }

 private:
  bool Set(NanOrigin origin);

  std::optional<NanOrigin> origin_;
  // The open step.
  bool input_trouble_ = false;  // The model input held an Inf outside a mask.
  bool mattered_ = false;       // A layer output, a NaN input or the model output carried trouble.
  std::optional<NanOrigin> candidate_;  // First call (begin order) that received trouble.
  uint64_t candidate_seq_ = 0;
  // A troubled output gradient no layer made (yet): "<loss>" at EndBackward().
  std::optional<NanOrigin> loss_candidate_;
};

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_NONFINITE_H_
