#include "draw/op_graph_view.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tracetorch::draw {
namespace {

constexpr int32_t kNoCollapse = std::numeric_limits<int32_t>::max();

// The module structure of the drawn scope: relative depths, which ops are in it.
struct Scope {
  int32_t pass = -1;           // The drawn pass; -1 when the graph has no module passes.
  std::vector<int32_t> depth;  // Per pass: depth below `pass` (0 for it), -1 outside.
  std::vector<bool> in;        // Per op: inside the scope.
  int32_t max_depth = 0;
};

Scope MakeScope(const OpGraph& g, int32_t pass) {
  Scope s;
  s.pass = pass;
  s.depth.assign(g.modules.size(), -1);
  for (size_t m = 0; m < g.modules.size(); ++m) {
    int32_t d = 0;
    int32_t p = static_cast<int32_t>(m);
    while (p >= 0 && p != pass) {
      p = g.modules[p].parent;
      ++d;
    }
    if (p == pass && pass >= 0) {
      s.depth[m] = d;
      s.max_depth = std::max(s.max_depth, d);
    }
  }
  s.in.assign(g.ops.size(), pass < 0);
  if (pass >= 0) {
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const int32_t m = g.ops[i].module_pass;
      s.in[i] = m >= 0 && static_cast<size_t>(m) < g.modules.size() && s.depth[m] >= 0;
    }
  }
  return s;
}

bool SameOps(const OpGraph& g, const ModulePass& a, const ModulePass& b) {
  if (a.first_op < 0 || b.first_op < 0) return false;
  if (a.last_op - a.first_op != b.last_op - b.first_op) return false;
  for (int32_t k = 0; k <= a.last_op - a.first_op; ++k) {
    if (g.ops[a.first_op + k].func_name != g.ops[b.first_op + k].func_name) return false;
  }
  return true;
}

// True when every tensor `b` consumed came out of `a` or was also consumed by `a` (a mask, an
// input both read), so that folding them hides no other edge into `b`.
bool FedOnlyBy(const ModulePass& a, const ModulePass& b) {
  if (b.inputs.empty()) return false;
  for (const OpSource& s : b.inputs) {
    if (s.kind == OpSource::Kind::kOp) {
      if (s.index < a.first_op || s.index > a.last_op) return false;
      continue;
    }
    bool shared = false;
    for (const OpSource& t : a.inputs) {
      shared = shared || (t.kind == s.kind && t.index == s.index && t.output == s.output);
    }
    if (!shared) return false;
  }
  return true;
}

Mark OpMark(const OpNode& op, std::string* text) {
  if (!op.tensor_output || op.outputs.empty()) return Mark::kNone;
  const TensorInfo& t = op.outputs[0];
  const int64_t nan = NanCount(t);
  const int64_t inf = InfCount(t);
  if (nan > 0 || inf > 0) {
    *text = nan > 0 ? absl::StrCat("NaN ", nan) : absl::StrCat("Inf ", inf);
    if (nan > 0 && inf > 0) absl::StrAppend(text, ", Inf ", inf);
    return Mark::kNonFinite;
  }
  if (t.stats && t.stats->min && t.stats->max && *t.stats->min == 0 && *t.stats->max == 0) {
    *text = "dead (all zero)";
    return Mark::kDead;
  }
  return Mark::kNone;
}

std::string OpShape(const OpNode& op) {
  if (op.outputs.empty()) return "";
  std::string s = ShapeText(op.outputs[0].shape);
  if (op.outputs.size() > 1) absl::StrAppend(&s, " (+", op.outputs.size() - 1, ")");
  return s;
}

std::string SourceShape(const OpGraph& g, const OpSource& s) {
  switch (s.kind) {
    case OpSource::Kind::kOp:
      if (s.index >= 0 && static_cast<size_t>(s.index) < g.ops.size() && s.output >= 0 &&
          static_cast<size_t>(s.output) < g.ops[s.index].outputs.size()) {
        return ShapeText(g.ops[s.index].outputs[s.output].shape);
      }
      return "";
    case OpSource::Kind::kInput:
      if (s.index >= 0 && static_cast<size_t>(s.index) < g.inputs.size()) {
        return ShapeText(g.inputs[s.index].tensor.shape);
      }
      return "";
    default:
      return "";
  }
}

std::string PassTitle(const OpGraph& g, int32_t pass) { return g.ModuleAddress(pass); }

class ViewBuilder {
 public:
  // `fold`: fold runs of identical blocks at collapse_depth; `open_first`: and draw the first
  // block of each run open (collapsed one level deeper), the rest of the run folded.
  ViewBuilder(const OpGraph& g, const Scope& scope, int32_t collapse_depth, bool fold,
              bool open_first = false)
      : g_(g), scope_(scope), depth_(collapse_depth), fold_(fold), open_first_(open_first) {}

  OpGraphView Build() {
    AddBoundary();
    AssignUnits();
    AddEdges();
    view_.collapse_depth = depth_ == kNoCollapse ? -1 : depth_;
    return std::move(view_);
  }

 private:
  // The pass of depth depth_ that contains op i's pass, or -1; inside an open pass, the pass
  // one level deeper.
  int32_t BoxOf(int32_t op) const {
    const int32_t own = g_.ops[op].module_pass;
    if (depth_ == kNoCollapse || own < 0 || scope_.depth[own] < depth_) return -1;
    int32_t m = own;
    while (scope_.depth[m] > depth_) m = g_.modules[m].parent;
    if (!open_.contains(m)) return m;
    if (scope_.depth[own] <= depth_) return -1;  // Run by the open pass itself.
    m = own;
    while (scope_.depth[m] > depth_ + 1) m = g_.modules[m].parent;
    return m;
  }

  // The cluster of a node inside pass `m` (walking out to the scope), created on first use.
  // Passes that ran a single op get no cluster: their node names them instead.
  int32_t ClusterOf(int32_t m) {
    if (m < 0 || m == scope_.pass || scope_.depth[m] <= 0) return -1;
    const ModulePass& pass = g_.modules[m];
    if (pass.first_op >= 0 && pass.first_op == pass.last_op) return ClusterOf(pass.parent);
    if (auto it = cluster_of_pass_.find(m); it != cluster_of_pass_.end()) return it->second;
    const int32_t parent = ClusterOf(pass.parent);
    ViewCluster c;
    c.pass = m;
    c.parent = parent;
    c.title = absl::StrCat(PassTitle(g_, m), ": ", pass.type);
    view_.clusters.push_back(std::move(c));
    const int32_t index = static_cast<int32_t>(view_.clusters.size()) - 1;
    cluster_of_pass_[m] = index;
    return index;
  }

  int32_t AddNode(ViewNode n) {
    view_.nodes.push_back(std::move(n));
    return static_cast<int32_t>(view_.nodes.size()) - 1;
  }

  void AssignUnits() {
    unit_.assign(g_.ops.size(), -1);
    absl::flat_hash_map<int32_t, int32_t> box_node;  // pass -> node
    // Folding: the first pass of each run of foldable siblings, per member.
    absl::flat_hash_map<int32_t, int32_t> run_head;
    if (fold_ && depth_ != kNoCollapse) FindRuns(run_head);
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      if (!scope_.in[i]) continue;
      const OpNode& op = g_.ops[i];
      const int32_t box = BoxOf(static_cast<int32_t>(i));
      if (box < 0) {
        ViewNode n;
        n.kind = ViewNode::Kind::kOp;
        n.id = absl::StrCat("op", i);
        n.title = op.label;
        n.detail = op.func_name;
        const int32_t m = op.module_pass;
        if (m >= 0 && m != scope_.pass && g_.modules[m].first_op == g_.modules[m].last_op) {
          absl::StrAppend(&n.detail, " · ", PassTitle(g_, m));
        }
        n.shape = OpShape(op);
        n.mark = OpMark(op, &n.mark_text);
        if (g_.nan_origin && *g_.nan_origin == static_cast<int32_t>(i)) {
          n.mark_text = absl::StrCat("NaN origin: ", n.mark_text);
        }
        n.cluster = ClusterOf(m);
        n.ops = {static_cast<int32_t>(i)};
        unit_[i] = AddNode(std::move(n));
        continue;
      }
      const int32_t head = run_head.contains(box) ? run_head[box] : box;
      auto it = box_node.find(head);
      if (it == box_node.end()) {
        const ModulePass& pass = g_.modules[head];
        ViewNode n;
        n.cluster = ClusterOf(pass.parent);
        n.repeat = run_length_.contains(head) ? run_length_[head] : 1;
        if (n.repeat > 1) {
          n.kind = ViewNode::Kind::kFolded;
          n.id = absl::StrCat("f", head);
          n.title = absl::StrCat(PassTitle(g_, head), " … ", PassTitle(g_, run_last_[head]));
          n.detail = absl::StrCat(pass.type, " ×", n.repeat);
          view_.folded += n.repeat - 1;
        } else {
          n.kind = ViewNode::Kind::kModule;
          n.id = absl::StrCat("m", head);
          n.title = PassTitle(g_, head);
          n.detail = pass.type;
        }
        const int32_t last = n.repeat > 1 ? run_last_[head] : head;
        if (!g_.modules[last].outputs.empty()) {
          n.shape = SourceShape(g_, g_.modules[last].outputs[0]);
        }
        it = box_node.emplace(head, AddNode(std::move(n))).first;
      }
      ViewNode& n = view_.nodes[it->second];
      n.ops.push_back(static_cast<int32_t>(i));
      std::string text;
      const Mark mark = OpMark(op, &text);
      if (mark == Mark::kNonFinite && n.mark != Mark::kNonFinite) {
        n.mark = mark;
        n.mark_text = absl::StrCat(text, " in ", op.label);
      }
      unit_[i] = it->second;
    }
    // A box is dead when what it returns is.
    for (ViewNode& n : view_.nodes) {
      const bool box = n.kind == ViewNode::Kind::kModule || n.kind == ViewNode::Kind::kFolded;
      if (!box) continue;
      absl::StrAppend(&n.detail, " (", n.ops.size(), n.ops.size() == 1 ? " op)" : " ops)");
      if (n.mark != Mark::kNone) continue;
      const int32_t last = n.ops.back();
      std::string text;
      if (OpMark(g_.ops[last], &text) == Mark::kDead) {
        n.mark = Mark::kDead;
        n.mark_text = text;
      }
    }
  }

  // Runs of consecutive sibling passes at depth depth_ that fold.
  void FindRuns(absl::flat_hash_map<int32_t, int32_t>& run_head) {
    std::map<int32_t, std::vector<int32_t>> siblings;  // parent -> passes of depth depth_
    for (size_t m = 0; m < g_.modules.size(); ++m) {
      if (scope_.depth[m] == depth_ && g_.modules[m].first_op >= 0) {
        siblings[g_.modules[m].parent].push_back(static_cast<int32_t>(m));
      }
    }
    for (const auto& [parent, passes] : siblings) {
      size_t k = 0;
      while (k < passes.size()) {
        size_t end = k + 1;
        while (end < passes.size() && g_.modules[passes[end]].type == g_.modules[passes[k]].type &&
               SameOps(g_, g_.modules[passes[k]], g_.modules[passes[end]]) &&
               FedOnlyBy(g_.modules[passes[end - 1]], g_.modules[passes[end]])) {
          ++end;
        }
        size_t first = k;
        if (end - k > 1 && open_first_) open_.insert(passes[first++]);
        if (end - first > 1) {
          for (size_t j = first; j < end; ++j) run_head[passes[j]] = passes[first];
          run_length_[passes[first]] = static_cast<int32_t>(end - first);
          run_last_[passes[first]] = passes[end - 1];
        }
        k = end;
      }
    }
  }

  // The node standing for a tensor source from outside the scope (created on first use).
  int32_t BoundaryNode(const OpSource& s) {
    if (s.kind == OpSource::Kind::kParameter || s.kind == OpSource::Kind::kOther) return -1;
    const std::pair<int, int64_t> key{static_cast<int>(s.kind),
                                      (static_cast<int64_t>(s.index) << 16) | s.output};
    if (auto it = boundary_.find(key); it != boundary_.end()) return it->second;
    ViewNode n;
    n.kind = ViewNode::Kind::kInput;
    n.id = absl::StrCat("in", boundary_.size());
    if (s.kind == OpSource::Kind::kInput) {
      n.title = s.index >= 0 && static_cast<size_t>(s.index) < g_.inputs.size()
                    ? g_.inputs[s.index].name
                    : "input";
      n.detail = "input";
    } else {
      n.title = g_.ops[s.index].label;
      n.detail = "from outside";
    }
    n.shape = SourceShape(g_, s);
    const int32_t node = AddNode(std::move(n));
    boundary_[key] = node;
    return node;
  }

  // The node that produced `s`, as drawn.
  int32_t SourceNode(const OpSource& s) {
    if (s.kind == OpSource::Kind::kOp && s.index >= 0 &&
        static_cast<size_t>(s.index) < g_.ops.size() && scope_.in[s.index]) {
      return unit_[s.index];
    }
    return BoundaryNode(s);
  }

  void AddBoundary() {
    // The graph's inputs first (in order) so that they read top-left even when unused first.
    if (scope_.pass <= 0) {
      for (size_t k = 0; k < g_.inputs.size(); ++k) {
        BoundaryNode(OpSource{OpSource::Kind::kInput, static_cast<int32_t>(k), 0});
      }
    }
  }

  void AddEdge(int32_t from, int32_t to, const std::string& shape) {
    if (from < 0 || to < 0 || from == to) return;
    if (!edge_seen_.emplace(std::make_pair(from, to), true).second) return;
    ViewEdge e;
    e.from = from;
    e.to = to;
    const auto in = in_shape_.find(from);
    if (in == in_shape_.end() || in->second != shape) e.label = shape;
    if (!in_shape_.contains(to)) in_shape_[to] = shape;
    view_.edges.push_back(std::move(e));
  }

  void AddEdges() {
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      if (!scope_.in[i]) continue;
      for (const OpInput& in : g_.ops[i].inputs) {
        AddEdge(SourceNode(in.source), unit_[i], ShapeText(in.tensor.shape));
      }
    }
    const std::vector<OpSource>& outs =
        scope_.pass > 0 ? g_.modules[scope_.pass].outputs : g_.outputs;
    for (size_t k = 0; k < outs.size(); ++k) {
      ViewNode n;
      n.kind = ViewNode::Kind::kOutput;
      n.id = absl::StrCat("out", k);
      n.title = outs.size() > 1 ? absl::StrCat("output ", k) : "output";
      n.detail = "output";
      n.shape = SourceShape(g_, outs[k]);
      const int32_t node = AddNode(std::move(n));
      AddEdge(SourceNode(outs[k]), node, view_.nodes[node].shape);
    }
  }

  const OpGraph& g_;
  const Scope& scope_;
  const int32_t depth_;
  const bool fold_;
  const bool open_first_;
  absl::flat_hash_set<int32_t> open_;  // Passes of depth depth_ drawn open (open_first_).
  OpGraphView view_;
  std::vector<int32_t> unit_;  // op -> node
  absl::flat_hash_map<int32_t, int32_t> cluster_of_pass_;
  absl::flat_hash_map<int32_t, int32_t> run_length_;  // head pass -> run length
  absl::flat_hash_map<int32_t, int32_t> run_last_;    // head pass -> last pass of the run
  std::map<std::pair<int, int64_t>, int32_t> boundary_;
  absl::flat_hash_map<std::pair<int32_t, int32_t>, bool> edge_seen_;
  absl::flat_hash_map<int32_t, std::string> in_shape_;  // node -> shape of its first input
};

}  // namespace

absl::StatusOr<Collapse> ParseCollapse(std::string_view text) {
  if (text == "none") return Collapse::kNone;
  if (text == "max") return Collapse::kMax;
  if (text == "auto") return Collapse::kAuto;
  return absl::InvalidArgumentError(
      absl::StrCat("collapse: expected one of none, max, auto, got \"", std::string(text), "\""));
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  return absl::StrJoin(shape, "x");
}

absl::StatusOr<OpGraphView> BuildOpGraphView(const OpGraph& graph, const ViewOptions& options) {
  int32_t pass = graph.modules.empty() ? -1 : 0;
  if (!options.module.empty()) {
    pass = graph.FindModulePass(options.module);
    if (pass < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("module \"", options.module, "\": no such module pass in this graph"));
    }
  }
  const Scope scope = MakeScope(graph, pass);
  switch (options.collapse) {
    case Collapse::kNone:
      return ViewBuilder(graph, scope, kNoCollapse, false).Build();
    case Collapse::kMax:
      return ViewBuilder(graph, scope, scope.max_depth >= 1 ? 1 : kNoCollapse, false).Build();
    case Collapse::kAuto:
      break;
  }
  const auto fits = [&](const OpGraphView& v) {
    return static_cast<int64_t>(v.nodes.size()) <= options.max_nodes;
  };
  OpGraphView view = ViewBuilder(graph, scope, kNoCollapse, false).Build();
  if (fits(view)) return view;
  for (int32_t d = scope.max_depth; d >= 1; --d) {
    view = ViewBuilder(graph, scope, d, true).Build();
    if (!fits(view)) continue;
    if (view.folded > 0) {
      // Room left: show what one block of each run does, the rest of the run folded.
      OpGraphView open = ViewBuilder(graph, scope, d, true, true).Build();
      if (fits(open)) return open;
    }
    return view;
  }
  return view;  // Depth 1 folded, the fewest nodes there are.
}

}  // namespace tracetorch::draw
