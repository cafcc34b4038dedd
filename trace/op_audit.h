// The health of one captured forward pass, from its op graph alone (trace/op_graph.h): where a
// NaN/Inf first appeared and which activations died. What needs the tensors (the replay, the
// exact zero fraction of an almost-dead output) is the agent's: tracetorch.audit in Python.
//
//   non-finite origin  where trouble that mattered entered (trace/nonfinite.h: a NaN anywhere,
//                      or an Inf outside a mask that reached a module's or the model's output),
//                      walked back to the first op whose inputs carried none, with its module
//                      pass; or, when it came in with a graph input, that input. Masks and the
//                      -inf that softmax, masked_fill or where absorb are not findings.
//   dead outputs       ops whose output is all zeros (statistics min == max == 0) and that are
//                      an activation (relu, gelu, ...) or read one's output directly: a dead
//                      ReLU and what it feeds. The zero fraction is 1 here; statistics do not
//                      carry a zero count, so "almost all zero" is left to the tensors.
//
// Example:
//   OpAuditReport r = AuditOpGraph(graph);
//   std::cout << RenderOpAudit(r);
//
// Thread-compatible: no shared state.
#ifndef TRACETORCH_TRACE_OP_AUDIT_H_
#define TRACETORCH_TRACE_OP_AUDIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace/op_graph.h"

namespace tracetorch {

struct AuditedOp {
  int32_t op = -1;     // Index into OpGraph::ops.
  std::string label;   // "relu_1_3".
  std::string func;    // "relu_".
  std::string module;  // Address of its innermost pass ("layer1.0.relu"), "" for none.
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  double zero_fraction = 0;  // Dead outputs: the share of zeros (1 from statistics).
  std::string after;         // Dead outputs: the activation it is or reads ("relu_1_3").
};

struct OpAuditReport {
  std::string model_name;
  int32_t ops = 0;
  int32_t ops_with_stats = 0;  // Ops whose output statistics were captured.
  std::optional<AuditedOp> nan_origin;
  std::string nan_input;      // A graph input that brought the trouble in ("x"); "" when none.
  int32_t nonfinite_ops = 0;  // Ops with a NaN/Inf in an output (masks and absorbed ones too).
  std::vector<AuditedOp> dead;
};

// True for the element-wise activations whose output can die: relu, relu_, relu6, leaky_relu,
// gelu, silu, elu, hardtanh, hardswish, threshold, softplus, mish (and their in-place forms).
bool IsActivation(std::string_view func_name);

OpAuditReport AuditOpGraph(const OpGraph& graph);

// {"model_name", "ops", "ops_with_stats", "nan_origin": op | null, "nan_input": name | null,
//  "nonfinite_ops", "dead": [op]}; op = {"op", "label", "func", "module", "nan_count",
//  "inf_count", "zero_fraction", "after"}. Deterministic.
std::string OpAuditToJson(const OpAuditReport& report, int indent = 1);

// A short plain-text report: one line per check, then a table of the dead outputs.
std::string RenderOpAudit(const OpAuditReport& report);

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_OP_AUDIT_H_
