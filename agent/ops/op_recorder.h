// The op-level capture engine: records one forward pass as a trace/op_graph.h OpGraph, through a
// thread-local at::RecordFunction callback (scope FUNCTION, with inputs and outputs).
//
// What it records: every top-level dispatcher operator that runs on the recording thread while it
// is active — an operator that starts while another recorded operator is running is internal to
// it and left out (`linear` is recorded, the `addmm` inside it is not). A Python autograd
// Function's apply is no operator: the ops it runs are top-level (torch.utils.checkpoint's
// blocks are recorded op by op, as without it). Left out too, because they
// are no part of the data flow, are the metadata queries of kSkippedOps below (aten::size, stride,
// dim, numel, is_contiguous, ... — most never reach the dispatcher from Python anyway). `item()`
// is recorded with tensor_output = false. Operators run with RecordFunction disabled (our own
// work, an intervention's function) are not seen.
//
// Data flow: the producer of each tensor is found by its TensorImpl address; the recorder keeps a
// c10::weak_intrusive_ptr to every tensor it has seen, so that an address is not reused while it
// records (a weak reference does not keep the storage alive). A tensor whose TensorImpl is a
// shallow copy of an op's output (what torch.zeros_like, torch.arange ... hand the model when the
// output is saved) is matched by its data pointer and geometry. Model inputs (AddInput) and the
// parameters/buffers registered with AddParameter are their own nodes; a parameter appears in
// OpGraph::params once an op reads it. An in-place op becomes the producer of the tensor it writes.
//
// Module containment: the caller brackets each module call with PushModule/PopModule (Python
// forward hooks, or the TorchScript door). PopModule marks the ops that produced the module's
// outputs as `output_of` that pass, and then applies the Module(...) parts of the save and
// intervene selectors (the moment they can match, see trace/op_select.h).
//
// Saving: the `save` selector decides, when an op ends (or when a pass it is the output of ends),
// whether its output tensors are kept (a reference, no copy). Copy-on-write: when an in-place op
// is about to write a tensor whose earlier value was kept, the kept value is cloned first, so a
// saved activation is always what its op produced.
//
// Interventions: when an op's output matches an intervene selector, `intervene(site, output)` is
// called (recording suspended: RecordFunction disabled) and, when it returns a defined tensor, the
// result is written into the output in place (`copy_`, under NoGradGuard), so that downstream ops
// see it. At most one intervention per op: the first matching site wins. Sites that match when
// the op ends (func, label, in_module) apply to ops with exactly one tensor output, before the
// output statistics are computed; Module(...) sites apply when the pass ends (statistics already
// taken).
//
// NaN origin: at Stop(), trouble() is trace/nonfinite.h's FindOpTrouble of the graph and
// graph().nan_origin its origin: where trouble that mattered (a NaN, or an Inf outside a mask that
// reached a module's or the model's output) entered, walked back to the first op whose tensor
// inputs (op outputs and graph inputs, by their statistics; parameters are not checked) carried
// none — a NaN weight makes the op that reads it the origin. Masks and -inf that softmax,
// masked_fill or where absorb are no origin. Needs `stats` (nonfinite_only suffices).
//
// Errors: nothing throws out of a callback into the traced program. A failure inside a callback is
// counted (hook_errors()) and the first message kept (first_error()); an intervention that throws
// is recorded likewise and the output left as it was.
//
// Thread-safety: not thread-safe. One recorder records on the thread that called Start(); every
// method runs on that thread. At most one recorder is active per thread.
#ifndef TRACETORCH_AGENT_OPS_OP_RECORDER_H_
#define TRACETORCH_AGENT_OPS_OP_RECORDER_H_

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "guest/hook_guard.h"
#include "trace/nonfinite.h"
#include "trace/op_graph.h"
#include "trace/op_select.h"

namespace tracetorch::ops {

// Operators never recorded (no data flow): sizes and other metadata of a tensor.
inline constexpr std::string_view kSkippedOps[] = {
    "aten::size",
    "aten::sym_size",
    "aten::stride",
    "aten::sym_stride",
    "aten::dim",
    "aten::numel",
    "aten::sym_numel",
    "aten::is_contiguous",
    "aten::is_floating_point",
    "aten::is_complex",
    "aten::is_nonzero",
    "aten::element_size",
    "aten::storage_offset",
    "aten::is_same_size",
    "aten::is_set_to",
    "aten::_version",
    "aten::output_nr",
    "aten::requires_grad_",
    "aten::retain_grad",
    "aten::_has_compatible_shallow_copy_type",
};

// Ops each of whose output elements is a copy of an input element, the max of some, or zero:
// with finite inputs their outputs are finite. In nonfinite_only mode such an op's output is
// counted {0, 0} without a scan when every tensor input is known finite (an op output or a graph
// input whose counts are zero; a parameter or an untracked tensor is scanned as usual). Ops with
// a scalar that could bring an Inf (clamp, hardtanh, pad, dropout's scale) are not in the list.
inline constexpr std::string_view kFinitePreservingOps[] = {
    "relu",
    "relu_",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "max_pool2d_with_indices",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "flatten",
    "unflatten",
    "view",
    "view_as",
    "reshape",
    "reshape_as",
    "_reshape_alias",
    "contiguous",
    "clone",
    "detach",
    "alias",
    "t",
    "transpose",
    "permute",
    "movedim",
    "squeeze",
    "unsqueeze",
    "expand",
    "expand_as",
    "select",
    "slice",
    "narrow",
    "cat",
    "stack",
    "chunk",
    "split",
    "unbind",
    "flip",
};

struct OpRecorderOptions {
  OpSelector save = OpSelector::All();  // Whose outputs to keep; None() keeps none.
  bool stats = true;                    // Output statistics (agent/stats.h, full mode).
  // With `stats`: only count NaN/Inf (TensorInfo::nonfinite, `stats` left absent), no moments —
  // all the NaN origin needs, at a fraction of the cost (TraceSession(ops="on_nan") uses it).
  // Counted by finite_scan.h's CountNonFinite, or not at all for a kFinitePreservingOps op whose
  // inputs are known finite. Limit: a write through another view of an input that no recorded op
  // made (the copy-on-write limit) is not seen by that inference.
  bool nonfinite_only = false;
  // Sites, in order; `intervene` gets the index of the first that matched.
  std::vector<OpSelector> intervene_sites;
  // Called with the site index and the op's output; returns the replacement (undefined: keep).
  // May throw (recorded as a hook error, the output left as is).
  std::function<at::Tensor(int32_t site, const at::Tensor& output)> intervene;
  // TorchScript: before each op, open and close module passes (nested in the innermost pass the
  // caller pushed) so that they follow the interpreter's module hierarchy
  // (script_hierarchy.h). Such a pass ends when an op runs outside it (or when the caller's pass
  // around it ends); its output is taken to be the outputs of the last op it ran. Two calls of
  // the same module with no op of another module between them are one pass.
  bool script_modules = false;
};

class OpRecorder {
 public:
  explicit OpRecorder(OpRecorderOptions options);
  ~OpRecorder();  // Stops if still active.
  OpRecorder(const OpRecorder&) = delete;
  OpRecorder& operator=(const OpRecorder&) = delete;

  // Before Start(): the graph inputs (flattened) and the parameters/buffers ops may read.
  void AddInput(std::string name, const at::Tensor& tensor);
  void AddParameter(std::string name, const at::Tensor& tensor, bool buffer);

  // Installs the callback on the calling thread. FailedPrecondition when a recorder is already
  // active on it; Internal when libtorch refuses the callback.
  absl::Status Start();
  // Removes the callback; closes passes still open. REQUIRES: the thread of Start().
  void Stop();
  bool active() const { return active_; }

  // Opens a module pass nested in the innermost open one; returns its index in graph().modules.
  // `inputs`: the tensors it was called with. `params`: elements of its direct parameters.
  int32_t PushModule(std::string_view path, std::string_view type,
                     const std::vector<at::Tensor>& inputs, int64_t params);
  // Closes `pass` (and any pass opened inside it and left open) with the tensors it returned.
  void PopModule(int32_t pass, const std::vector<at::Tensor>& outputs);
  // After the forward: what produced the tensors the model returned.
  void SetOutputs(const std::vector<at::Tensor>& outputs);

  // Where a tensor came from, as the graph would say now.
  OpSource SourceOf(const at::Tensor& tensor) const;

  const OpGraph& graph() const { return graph_; }
  // What FindOpTrouble found at Stop() (empty before).
  const OpTrouble& trouble() const { return trouble_; }
  OpGraph& mutable_graph() { return graph_; }
  // The kept outputs of graph().ops[op] (empty when not saved).
  const std::vector<at::Tensor>& saved(int32_t op) const;
  int64_t hook_errors() const { return errors_.count(); }
  const std::string& first_error() const { return first_error_; }

  // Callback bodies (public for the trampolines).
  std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn);
  void OnEnd(const at::RecordFunction& fn, at::ObserverContext* ctx);

 private:
  using Clock = std::chrono::steady_clock;
  struct Producer {
    c10::weak_intrusive_ptr<c10::TensorImpl> impl;
    OpSource source;
  };
  struct Pending {  // A registered parameter not yet read by an op.
    std::string name;
    c10::weak_intrusive_ptr<c10::TensorImpl> impl;
    bool buffer = false;
  };
  // Per operator schema: argument names and which arguments it writes.
  struct SchemaInfo {
    std::vector<std::string> names;
    std::vector<bool> writes;
    bool known = false;
  };
  struct OpenPass {
    int32_t pass = 0;
    int32_t first = 0;    // ops.size() when it opened.
    bool script = false;  // Opened by ScriptTransition().
  };

  const SchemaInfo& SchemaOf(const at::RecordFunction& fn);
  void Record(const c10::TensorImpl* impl, const at::Tensor& t, OpSource source);
  // A strided, non-nested tensor with elements: one whose data pointer can key it.
  static bool HasData(const at::Tensor& t);
  // The TensorImpl the recorder knows for `t`: its own, or, for a tensor that is a shallow copy
  // of an op's output (torch's factory functions copy the TensorImpl of what the op returned when
  // the recorder keeps a reference to it: the same storage, offset, sizes, strides and dtype),
  // that output's.
  const c10::TensorImpl* Canonical(const at::Tensor& t) const;
  OpSource Resolve(const at::Tensor& t);  // Also turns a pending parameter into a graph param.
  // Keeps `t` as output `output` of `op` (once), for copy-on-write too.
  void Keep(int32_t op, int32_t output, const at::Tensor& t);
  void Intervene(int32_t op, int32_t site, const at::Tensor& output);
  void CopyOnWrite(const at::Tensor& written);
  OpSite Site(int32_t op) const;
  // Makes the script passes on top of open_ follow the current TorchScript module hierarchy.
  void ScriptTransition();
  // Ends an open pass that returned `outputs` (already popped from open_).
  void ClosePass(const OpenPass& p, const std::vector<at::Tensor>& outputs);
  void Fail(std::string_view cause, std::string_view message);
  // Fills info->stats (or info->nonfinite, with nonfinite_only) for `t`.
  void Measure(const at::Tensor& t, TensorInfo* info) const;
  // nonfinite_only: `node` is a kFinitePreservingOps op whose tensor inputs are all known finite.
  bool FiniteByInputs(const OpNode& node) const;
  // Sets trouble_ and graph_.nan_origin from the output statistics (at Stop()).
  void FindNanOrigin();

  const OpRecorderOptions options_;
  const bool save_all_;
  const bool save_none_;
  const bool save_at_pop_;       // The save selector needs module outputs.
  const bool intervene_at_pop_;  // Some intervene site needs module outputs.

  OpGraph graph_;
  OpTrouble trouble_;
  bool active_ = false;
  at::CallbackHandle handle_ = at::INVALID_CALLBACK_HANDLE;
  int32_t depth_ = 0;  // Recorded operators open (their internals are not recorded).

  absl::flat_hash_map<const c10::TensorImpl*, Producer> producers_;
  // Op outputs by data pointer, for Canonical().
  absl::flat_hash_map<const void*, const c10::TensorImpl*> by_data_;
  absl::flat_hash_map<const c10::TensorImpl*, Pending> pending_params_;
  absl::flat_hash_map<std::string, int32_t> call_counts_;
  absl::flat_hash_map<std::string, int32_t> pass_counts_;
  absl::flat_hash_map<std::string, SchemaInfo> schemas_;
  std::vector<std::vector<at::Tensor>> saved_;  // Per op.
  std::vector<bool> intervened_;
  // Kept values by TensorImpl: (op, output) slots that hold that tensor, for copy-on-write.
  absl::flat_hash_map<const c10::TensorImpl*, std::vector<std::pair<int32_t, int32_t>>> kept_;
  std::vector<OpenPass> open_;
  std::vector<Clock::time_point> starts_;  // Per op.
  std::vector<at::Tensor> last_outputs_;   // Of the latest op (script_modules: pass outputs).

  guest::HookErrors errors_;
  std::string first_error_;
};

}  // namespace tracetorch::ops

#endif  // TRACETORCH_AGENT_OPS_OP_RECORDER_H_
