// Op-level capture from C++: take one forward pass of a TorchScript module apart to the operation,
// without Python. The same engine as Python's tl.trace (agent/ops/op_recorder.h): every top-level
// ATen operator the forward ran, with its arguments, outputs (statistics), module pass (from the
// interpreter's module hierarchy), parents and children, as a trace/op_graph.h OpGraph, plus the
// output tensors the `save` selector kept.
//
// Example:
//   torch::jit::Module model = torch::jit::load("resnet.pt");
//   tracetorch::TraceOpsOptions options;
//   options.save = tracetorch::OpSelector::Func("conv2d");
//   absl::StatusOr<tracetorch::OpTrace> trace =
//       tracetorch::TraceOps(model, {torch::rand({1, 3, 224, 224})}, options);
//   if (!trace.ok()) return trace.status();
//   for (const tracetorch::OpNode& op : trace->graph.ops) std::cout << op.label << "\n";
//   absl::Status s = tracetorch::WriteOpGraphFile("ops.json", trace->graph);  // op_graph_json.h
//
// Module passes follow TorchScript's rules (op_recorder.h, OpRecorderOptions::script_modules):
// a pass's output is the last op it ran; consecutive calls of one module with no other module's
// op between them are one pass. `graph.source` is "cpp".
//
// Threads: the capture sees only the operators of the calling thread. Errors: nothing throws; an
// exception of the forward is InvalidArgument with its message ("forward failed: ..."),
// FailedPrecondition when another op capture is active on the thread.
#ifndef TRACETORCH_TRACE_OPS_H_
#define TRACETORCH_TRACE_OPS_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trace/op_graph.h"
#include "trace/op_select.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace tracetorch {

struct TraceOpsOptions {
  OpSelector save = OpSelector::All();  // Whose outputs to keep; OpSelector::None(): none.
  bool capture_stats = true;            // Output statistics (mean, std, min, max, NaN/Inf).
  std::string model_name;               // Empty: the module's class name.
};

struct OpTrace {
  OpGraph graph;
  // activations[i]: the kept outputs of graph.ops[i] (empty when not saved; an undefined tensor
  // for an output that was not kept). References to the op's outputs, or a copy of what the op
  // produced when a later in-place op overwrote it.
  std::vector<std::vector<at::Tensor>> activations;
  c10::IValue output;  // What forward returned.
};

// Runs module.forward(inputs) once and records it. `module` is not modified (no hooks).
absl::StatusOr<OpTrace> TraceOps(torch::jit::Module& module, std::vector<c10::IValue> inputs,
                                 const TraceOpsOptions& options = {});

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_OPS_H_
