// What a picture of an op graph (trace/op_graph.h) shows, before any layout: the nodes (ops,
// collapsed module passes, folded runs of identical blocks, the graph's inputs and outputs), the
// nested clusters of the module passes that stay open, and the data-flow edges between nodes.
// draw/op_graph_dot.h turns a view into a Graphviz graph; a view is plain data so that what is
// drawn can be tested without Graphviz.
//
// Collapse levels:
//   kNone  every op is a node; every module pass that ran an op is a cluster, nested.
//   kMax   each top-level module pass (a child of the root pass, or of the drawn module) is one
//          node; ops that run outside them (in the root's own forward) are themselves.
//   kAuto  the deepest depth d at which collapsing every pass of depth d into one node keeps the
//          view at or under `max_nodes` nodes (kNone when the whole graph fits), then runs of
//          consecutive sibling passes of the same type and the same op sequence, each fed only by
//          the previous one (resnet's layer1.0, layer1.1; a transformer's layers), folded into
//          one node marked "×N"; when the budget still holds with the first block of each run
//          drawn open (its children as boxes) and the rest of the run folded, that is drawn. Ops
//          that no child pass contains (a block's residual add) stay nodes of their own whenever
//          their pass is open.
//
// Thread-compatible: no shared state.
#ifndef TRACETORCH_DRAW_OP_GRAPH_VIEW_H_
#define TRACETORCH_DRAW_OP_GRAPH_VIEW_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "trace/op_graph.h"

namespace tracetorch::draw {

enum class Collapse { kNone, kMax, kAuto };

// "none", "max", "auto"; InvalidArgument naming the choices otherwise.
absl::StatusOr<Collapse> ParseCollapse(std::string_view text);

struct ViewOptions {
  Collapse collapse = Collapse::kAuto;
  // A module pass address ("layer2", "block:2"; trace/op_graph.h FindModulePass): only the ops
  // inside it, with what it consumed and returned as boundary nodes. Empty: the whole graph.
  std::string module;
  int max_nodes = 80;  // kAuto's budget.
};

// A mark on a node whose output is not healthy.
enum class Mark {
  kNone,
  kNonFinite,  // A NaN or Inf in its output (for a box: in some op's output inside it).
  kDead,       // Its output is all zeros (statistics min == max == 0).
};

struct ViewNode {
  enum class Kind { kOp, kModule, kFolded, kInput, kOutput };
  Kind kind = Kind::kOp;
  std::string id;      // Unique, Graphviz-safe: "op12", "m7", "in0", "out0".
  std::string title;   // First label line: "conv2d_1_1", "layer1.0", "layer1.0 … layer1.1".
  std::string detail;  // Second line: "conv2d", "BasicBlock (12 ops)", "BasicBlock ×2".
  std::string shape;   // Output shape "1x64x56x56"; empty when unknown.
  Mark mark = Mark::kNone;
  std::string mark_text;     // "NaN 12", "Inf 3", "dead (all zero)"; empty without a mark.
  int32_t cluster = -1;      // Index into OpGraphView::clusters of the innermost enclosing one.
  int32_t repeat = 1;        // kFolded: how many passes it stands for.
  std::vector<int32_t> ops;  // Ops it stands for (indexes into OpGraph::ops), ascending.
};

struct ViewCluster {
  int32_t pass = -1;    // The module pass (index into OpGraph::modules).
  int32_t parent = -1;  // Enclosing cluster, -1 for none.
  std::string title;    // "layer1.0: BasicBlock".
};

struct ViewEdge {
  int32_t from = -1;  // Indexes into OpGraphView::nodes.
  int32_t to = -1;
  std::string label;  // The tensor's shape when it differs from the producer's input; else "".
};

struct OpGraphView {
  std::vector<ViewNode> nodes;
  std::vector<ViewCluster> clusters;  // Parents before children.
  std::vector<ViewEdge> edges;        // Distinct (from, to) pairs.
  int32_t collapse_depth = -1;        // Depth collapsed into boxes; -1 none (kNone or fits).
  int32_t folded = 0;                 // Passes folded away into "×N" nodes.
};

// The view of `graph` under `options`. InvalidArgument when `options.module` names no pass.
absl::StatusOr<OpGraphView> BuildOpGraphView(const OpGraph& graph, const ViewOptions& options);

// "1x64x56x56"; "scalar" for a 0-d tensor.
std::string ShapeText(const std::vector<int64_t>& shape);

}  // namespace tracetorch::draw

#endif  // TRACETORCH_DRAW_OP_GRAPH_VIEW_H_
