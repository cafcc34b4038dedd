// The op-level view of one forward pass: every tensor operation the model's code called, in
// execution order, with its arguments, outputs, module and data-flow edges.
//
// What an op is: one call of a tensor operation at the level the model's code wrote it — a torch
// function, a Tensor method, an operator such as `+` or `@`, an `F.*` call, a TorchScript
// instruction — not the kernels it dispatches to internally (`linear`, not the `addmm` inside it).
// In-place ops are ops (`relu_`, `add_`). Ops that return no tensor (`item()`) are kept with
// tensor_output = false; shape queries that never reach the dispatcher (`x.shape`) are not ops.
//
// Nodes of the data-flow graph are the ops plus the graph's inputs and the parameters/buffers the
// ops read; OpSource names which one produced a tensor. Module passes are the module calls of the
// forward, nested (a module called twice is two passes: "block:1", "block:2").
//
// Labels: "<func>_<n>_<i>", n the 1-based count of calls of that function so far, i the op's
// 1-based position in the forward ("conv2d_1_1", "relu_1_3"); the trailing "_" of an in-place
// func_name is dropped from the label ("relu_" -> "relu_2_5"; dunders such as "__and__" keep
// theirs). The same model and input shapes give the same labels on every run.
//
// Plain structs with value semantics; not synchronised. == compares member by member, as in
// trace/record.h. C++17 (installed header).
#ifndef TRACETORCH_TRACE_OP_GRAPH_H_
#define TRACETORCH_TRACE_OP_GRAPH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace/record.h"

namespace tracetorch {

// Where a tensor came from.
struct OpSource {
  enum class Kind {
    kOp,         // An op's output: `index` into OpGraph::ops, `output` which of its outputs.
    kInput,      // A graph input: `index` into OpGraph::inputs.
    kParameter,  // A parameter or buffer: `index` into OpGraph::params.
    kOther,      // Made outside the traced ops (a constant, a tensor the code built itself).
  };
  Kind kind = Kind::kOther;
  int32_t index = -1;
  int32_t output = 0;

  friend bool operator==(const OpSource&, const OpSource&);
  friend bool operator!=(const OpSource& a, const OpSource& b) { return !(a == b); }
};

// A tensor an op consumed: what it was and where it came from.
struct OpInput {
  TensorInfo tensor;  // No stats (the producer's output carries them).
  OpSource source;
  std::string arg;  // The schema's argument name ("input", "weight", "other"); may be empty.

  friend bool operator==(const OpInput&, const OpInput&);
  friend bool operator!=(const OpInput& a, const OpInput& b) { return !(a == b); }
};

// A non-tensor argument, as JSON text: 1, 0.5, true, null, "reflect", [2, 2].
struct OpArg {
  std::string name;  // The schema's argument name ("stride"); "arg<k>" when unknown.
  std::string value;

  friend bool operator==(const OpArg&, const OpArg&);
  friend bool operator!=(const OpArg& a, const OpArg& b) { return !(a == b); }
};

struct OpNode {
  std::string label;       // "conv2d_1_1"; unique within a graph.
  std::string func_name;   // "conv2d", "relu_", "add": the op name without its namespace.
  std::string op_name;     // The dispatcher's full name: "aten::conv2d", "aten::add.Tensor".
  int32_t call_index = 0;  // n: 1-based count of calls of func_name up to this one.
  int32_t index = 0;       // i: 1-based position in execution order (ops[index - 1]).
  // The innermost module pass that called it (index into OpGraph::modules): 0, the root pass, for
  // code of the model's own forward outside any child module; -1 only when no module was traced.
  int32_t module_pass = -1;
  std::vector<OpInput> inputs;      // Tensor arguments, schema order.
  std::vector<OpArg> args;          // Non-tensor arguments, schema order.
  std::vector<TensorInfo> outputs;  // With statistics when they were captured.
  std::vector<int32_t> parents;     // Ops whose outputs it consumed: distinct, ascending.
  std::vector<int32_t> children;    // Ops that consumed its outputs: distinct, ascending.
  // Module passes whose output is this op's output, innermost first (a Conv2d pass, then the
  // Sequential around it when the conv came last). Empty for a residual add inside a block.
  std::vector<int32_t> output_of;
  int64_t params = 0;             // Elements of the parameters/buffers it read.
  bool inplace = false;           // It writes one of its tensor arguments.
  bool tensor_output = true;      // false: it returned no tensor (item(), _local_scalar_dense).
  std::optional<double> time_ms;  // Host wall time from its start to its end.
  bool saved = false;             // Its output activation was kept (OpTrace holds the tensors).

  friend bool operator==(const OpNode&, const OpNode&);
  friend bool operator!=(const OpNode& a, const OpNode& b) { return !(a == b); }
};

struct ModulePass {
  std::string path;               // "layer3.1.conv2"; "" for the model itself.
  std::string type;               // Class name: "Conv2d", "BasicBlock"; the root's too.
  int32_t pass = 1;               // 1-based: the n-th call of this module in the forward.
  int32_t parent = -1;            // The enclosing pass, -1 for the root pass.
  std::vector<OpSource> inputs;   // Its tensor arguments (keyword ones too).
  std::vector<OpSource> outputs;  // What produced each tensor it returned.
  int32_t first_op = -1;          // Ops it ran, directly or nested: [first_op, last_op]
  int32_t last_op = -1;           // (indexes into OpGraph::ops; -1 when it ran none).
  int64_t params = 0;             // Elements of its own (direct) parameters.

  friend bool operator==(const ModulePass&, const ModulePass&);
  friend bool operator!=(const ModulePass& a, const ModulePass& b) { return !(a == b); }
};

// A graph input: a tensor handed to the model's forward (flattened from tuples, lists, dicts and
// keyword arguments).
struct OpGraphInput {
  std::string name;  // "input", "input.1", "x" (a keyword argument's name).
  TensorInfo tensor;

  friend bool operator==(const OpGraphInput&, const OpGraphInput&);
  friend bool operator!=(const OpGraphInput& a, const OpGraphInput& b) { return !(a == b); }
};

// A parameter or buffer some op read.
struct OpGraphParam {
  std::string name;  // "layer1.0.conv1.weight".
  TensorInfo tensor;
  bool buffer = false;

  friend bool operator==(const OpGraphParam&, const OpGraphParam&);
  friend bool operator!=(const OpGraphParam& a, const OpGraphParam& b) { return !(a == b); }
};

struct OpGraph {
  std::string model_name;
  std::string source;  // How it was captured: "eager", "torchscript" or "cpp".
  std::vector<OpGraphInput> inputs;
  std::vector<OpGraphParam> params;
  std::vector<OpNode> ops;
  std::vector<ModulePass> modules;  // In the order the passes began; modules[0] is the root.
  std::vector<OpSource> outputs;    // What produced each tensor the model returned.
  // The first op, in execution order, whose tensor inputs were all finite and whose output was
  // not (index into ops); nullopt when every output was finite or the non-finite value entered
  // with an input.
  std::optional<int32_t> nan_origin;
  // For a graph kept by a training-loop TraceSession (ops="on_nan"): the step it was captured at.
  std::optional<int64_t> step;

  // The op with this label, or nullptr. Linear scan.
  const OpNode* FindOp(std::string_view label) const;
  // A module pass by address: "layer3" (its first pass), "layer3:2" (its second), "" or "<root>"
  // for the root. -1 when there is none.
  int32_t FindModulePass(std::string_view address) const;
  // "layer3" when the module ran once in this forward, else "layer3:2"; "<root>" for the root.
  std::string ModuleAddress(int32_t pass) const;
  // How many passes the module at `path` made.
  int32_t PassCount(std::string_view path) const;
  // True when `pass` is `ancestor` or nested in it.
  bool Within(int32_t pass, int32_t ancestor) const;

  friend bool operator==(const OpGraph&, const OpGraph&);
  friend bool operator!=(const OpGraph& a, const OpGraph& b) { return !(a == b); }
};

// The label of the `index`-th op (1-based) that is the `call_index`-th call of `func_name`.
std::string OpLabel(std::string_view func_name, int32_t call_index, int32_t index);

// Fills every op's `children` from the `parents` lists (what a builder sets), ascending.
void LinkChildren(OpGraph& graph);

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_OP_GRAPH_H_
