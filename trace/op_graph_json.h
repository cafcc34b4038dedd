// The JSON layout of an OpGraph (trace/op_graph.h): what `trace.export("ops.json")` writes, what
// `tl.load` and `tracetorch ops` read. No tensors, only their metadata and statistics.
//
// Layout, version 1 (keys in this order; unknown keys are ignored when reading):
//   {"format": "tracetorch.ops", "version": 1, "model_name": "ResNet", "source": "eager",
//    "step": null, "nan_origin": null,
//    "inputs":  [{"name": "input", "tensor": T}],
//    "params":  [{"name": "conv1.weight", "buffer": false, "tensor": T}],
//    "modules": [{"path": "", "type": "ResNet", "pass": 1, "parent": -1, "first_op": 0,
//                 "last_op": 68, "params": 0, "inputs": [S], "outputs": [S]}],
//    "ops":     [{"label": "conv2d_1_1", "func_name": "conv2d", "op_name": "aten::conv2d",
//                 "call_index": 1, "index": 1, "module_pass": 1,
//                 "inputs": [{"arg": "input", "source": S, "tensor": T}],
//                 "args": [{"name": "stride", "value": [2, 2]}],
//                 "outputs": [T], "parents": [], "children": [1], "output_of": [1],
//                 "params": 9408, "inplace": false, "tensor_output": true, "time_ms": 0.41,
//                 "saved": true}],
//    "outputs": [S]}
// T is a tensor object as in a trace record ({"shape", "dtype", "device"} and, with statistics,
// "mean", "std", "min", "max", "nan_count", "inf_count"); S is a source {"kind": "op" | "input" |
// "param" | "other", "index": 3, "output": 0}. An arg's "value" is the argument as JSON.
// Indexes are 0-based into the document's arrays (an op's "index" is its 1-based position, as
// in its label).
//
// Thread-compatible: no shared state.
#ifndef TRACETORCH_TRACE_OP_GRAPH_JSON_H_
#define TRACETORCH_TRACE_OP_GRAPH_JSON_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trace/json_writer.h"
#include "trace/op_graph.h"

namespace tracetorch {

inline constexpr std::string_view kOpGraphFormat = "tracetorch.ops";
inline constexpr int kOpGraphVersion = 1;

// The document; `indent` spaces per level (0: one line). Deterministic.
std::string OpGraphToJson(const OpGraph& graph, int indent = 1);

// Writes one op object of the "ops" array (the layout above) to `w`: for tools that print a
// selection of the ops (`tracetorch ops --json`).
void WriteOpNodeJson(const OpNode& op, JsonWriter& w);

// Reads a document OpGraphToJson wrote, or the "op_graph" member of a training trace (a record
// with "layers" and no "format", see TraceRecord::op_graph_json); a training trace without one is
// InvalidArgument saying so. InvalidArgument naming the field for a document of the
// wrong shape ("ops[2].inputs[0].source.kind: expected one of op, input, param, other"), a
// "format" other than kOpGraphFormat, or a "version" newer than kOpGraphVersion; syntax errors
// give their line and column. Indexes are checked against the arrays they point into.
absl::StatusOr<OpGraph> ParseOpGraphJson(std::string_view text);

// The file at `path`: NotFound / PermissionDenied when it cannot be read, else as above.
absl::StatusOr<OpGraph> ReadOpGraphFile(const std::string& path);

// Writes the document atomically (trace/atomic_file.h).
absl::Status WriteOpGraphFile(const std::string& path, const OpGraph& graph, int indent = 1);

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_OP_GRAPH_JSON_H_
