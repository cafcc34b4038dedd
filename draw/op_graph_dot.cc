#include "draw/op_graph_dot.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <graphviz/gvplugin.h>
#include <stdio.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "trace/atomic_file.h"

namespace tracetorch::draw {
namespace {

// Graphviz's global state (its context, its error hook) is shared by the whole process.
ABSL_CONST_INIT absl::Mutex graphviz_mu(absl::kConstInit);
GVC_t* graphviz_context ABSL_GUARDED_BY(graphviz_mu) = nullptr;
std::string* graphviz_errors ABSL_GUARDED_BY(graphviz_mu) = nullptr;

int CollectError(char* message) ABSL_NO_THREAD_SAFETY_ANALYSIS {  // Called under graphviz_mu.
  if (graphviz_errors != nullptr && message != nullptr) absl::StrAppend(graphviz_errors, message);
  return 0;
}

#ifdef TRACETORCH_GRAPHVIZ_BUILTIN_PLUGINS
}  // namespace
}  // namespace tracetorch::draw
// The core renderers (svg, dot) and the dot layout, linked in (draw/CMakeLists.txt).
extern "C" {
extern gvplugin_library_t gvplugin_core_LTX_library;
extern gvplugin_library_t gvplugin_dot_layout_LTX_library;
}
namespace tracetorch::draw {
namespace {
lt_symlist_t builtin_plugins[] = {
    {"gvplugin_core_LTX_library", &gvplugin_core_LTX_library},
    {"gvplugin_dot_layout_LTX_library", &gvplugin_dot_layout_LTX_library},
    {nullptr, nullptr},
};
constexpr bool kBuiltinPluginsOnly = true;
// Only the linked-in plugins: no plugin configuration file is read, no plugin is loaded from the
// system (a wheel's own Graphviz must not meet the system's).
GVC_t* NewGraphvizContext() { return gvContextPlugins(builtin_plugins, /*demand_loading=*/0); }
#else
constexpr bool kBuiltinPluginsOnly = false;
// The plugins installed with Graphviz (its configuration file): every format it has.
GVC_t* NewGraphvizContext() { return gvContext(); }
#endif

// cgraph takes char* everywhere; it copies what it keeps.
char* C(const std::string& s) { return const_cast<char*>(s.c_str()); }
char* C(const char* s) { return const_cast<char*>(s); }

void Set(void* obj, const char* name, const std::string& value) {
  agsafeset(obj, C(name), C(value), C(""));
}

// A label line, with the characters Graphviz's escString reads escaped.
std::string Escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string NodeLabel(const ViewNode& n) {
  std::string label = Escape(n.title);
  if (!n.detail.empty() && n.kind != ViewNode::Kind::kInput && n.kind != ViewNode::Kind::kOutput) {
    absl::StrAppend(&label, "\\n", Escape(n.detail));
  }
  if (!n.shape.empty()) absl::StrAppend(&label, "\\n", Escape(n.shape));
  if (!n.mark_text.empty()) absl::StrAppend(&label, "\\n", Escape(n.mark_text));
  return label;
}

void StyleNode(Agnode_t* node, const ViewNode& n) {
  Set(node, "label", NodeLabel(n));
  std::string fill = "#ffffff";
  switch (n.kind) {
    case ViewNode::Kind::kOp:
      Set(node, "shape", "box");
      break;
    case ViewNode::Kind::kModule:  // Square corners and a heavier line: a box of ops.
      Set(node, "shape", "box");
      Set(node, "style", "filled");
      Set(node, "penwidth", "1.5");
      fill = "#e8eefc";
      break;
    case ViewNode::Kind::kFolded:
      Set(node, "shape", "box");
      Set(node, "style", "filled");
      Set(node, "peripheries", "2");
      fill = "#d6e0fa";
      break;
    case ViewNode::Kind::kInput:
    case ViewNode::Kind::kOutput:
      Set(node, "shape", "ellipse");
      fill = "#e6f4e6";
      break;
  }
  if (n.mark == Mark::kNonFinite) {
    fill = "#f8c4c4";
    Set(node, "color", "#c00000");
    Set(node, "penwidth", "2");
  } else if (n.mark == Mark::kDead) {
    fill = "#d9d9d9";
    Set(node, "fontcolor", "#555555");
  }
  Set(node, "fillcolor", fill);
}

// Builds the Graphviz graph of `view`. The caller agclose()s it. REQUIRES: graphviz_mu held.
Agraph_t* BuildGraph(const OpGraphView& view, const OpGraph& graph, const std::string& module,
                     Direction direction) {
  Agraph_t* g = agopen(C("G"), Agdirected, nullptr);
  Set(g, "rankdir", direction == Direction::kLeftRight ? "LR" : "TB");
  Set(g, "fontname", "Helvetica");
  Set(g, "fontsize", "10");
  std::string title = graph.model_name.empty() ? std::string("model") : graph.model_name;
  if (!module.empty()) absl::StrAppend(&title, ": ", module);
  Set(g, "label", Escape(title));
  Set(g, "labelloc", "t");
  Set(g, "nodesep", "0.25");
  Set(g, "ranksep", "0.3");
  // Declared on the root first so every node, edge and cluster has them.
  agattr(g, AGNODE, C("fontname"), C("Helvetica"));
  agattr(g, AGNODE, C("fontsize"), C("9"));
  agattr(g, AGNODE, C("style"), C("filled,rounded"));
  agattr(g, AGNODE, C("margin"), C("0.06,0.03"));
  agattr(g, AGNODE, C("height"), C("0.3"));
  agattr(g, AGEDGE, C("fontname"), C("Helvetica"));
  agattr(g, AGEDGE, C("fontsize"), C("8"));
  agattr(g, AGEDGE, C("arrowsize"), C("0.6"));
  agattr(g, AGRAPH, C("style"), C("rounded"));
  agattr(g, AGRAPH, C("color"), C("#999999"));
  agattr(g, AGRAPH, C("labeljust"), C("l"));
  if (static_cast<int>(view.nodes.size()) > kLargeGraphNodes) {
    // Bounded effort: network simplex and crossing minimisation capped, straight edges.
    Set(g, "newrank", "true");
    Set(g, "nslimit", "2");
    Set(g, "nslimit1", "2");
    Set(g, "mclimit", "0.2");
    Set(g, "searchsize", "20");
    Set(g, "remincross", "false");
    Set(g, "splines", "line");
  }
  std::vector<Agraph_t*> clusters(view.clusters.size(), nullptr);
  for (size_t c = 0; c < view.clusters.size(); ++c) {
    Agraph_t* parent = view.clusters[c].parent >= 0 ? clusters[view.clusters[c].parent] : g;
    clusters[c] = agsubg(parent, C(absl::StrCat("cluster_", c)), 1);
    Set(clusters[c], "label", Escape(view.clusters[c].title));
  }
  std::vector<Agnode_t*> nodes(view.nodes.size(), nullptr);
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    const ViewNode& n = view.nodes[i];
    Agraph_t* home = n.cluster >= 0 ? clusters[n.cluster] : g;
    nodes[i] = agnode(home, C(n.id), 1);
    StyleNode(nodes[i], n);
  }
  for (const ViewEdge& e : view.edges) {
    Agedge_t* edge = agedge(g, nodes[e.from], nodes[e.to], nullptr, 1);
    if (!e.label.empty()) Set(edge, "label", Escape(e.label));
  }
  return g;
}

const char* RendererName(DrawFormat f) {
  switch (f) {
    case DrawFormat::kSvg:
      return "svg";
    case DrawFormat::kPng:
      return "png";
    case DrawFormat::kPdf:
      return "pdf";
    case DrawFormat::kDot:
      return "dot";
  }
  return "svg";
}

absl::StatusOr<std::string> WriteDot(Agraph_t* g) {
  char* buffer = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&buffer, &size);
  if (f == nullptr) return absl::InternalError("open_memstream failed");
  const int rc = agwrite(g, f);
  fclose(f);
  std::string out(buffer == nullptr ? "" : std::string(buffer, size));
  free(buffer);
  if (rc != 0) return absl::InternalError("Graphviz could not write the DOT text");
  return out;
}

}  // namespace

absl::StatusOr<DrawFormat> ParseDrawFormat(std::string_view text) {
  if (text == "svg") return DrawFormat::kSvg;
  if (text == "png") return DrawFormat::kPng;
  if (text == "pdf") return DrawFormat::kPdf;
  if (text == "dot" || text == "gv") return DrawFormat::kDot;
  return absl::InvalidArgumentError(
      absl::StrCat("format: expected one of svg, png, pdf, dot, got \"", std::string(text), "\""));
}

absl::StatusOr<Direction> ParseDirection(std::string_view text) {
  if (text == "TB") return Direction::kTopBottom;
  if (text == "LR") return Direction::kLeftRight;
  return absl::InvalidArgumentError(
      absl::StrCat("direction: expected TB or LR, got \"", std::string(text), "\""));
}

absl::StatusOr<DrawFormat> DrawFormatForPath(std::string_view path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash)) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(path), ": no extension to take the format from (svg, png, pdf, dot)"));
  }
  return ParseDrawFormat(path.substr(dot + 1));
}

absl::StatusOr<DrawFormat> ResolveDrawFormat(std::string_view format, std::string_view path) {
  if (!format.empty()) return ParseDrawFormat(format);
  if (path.empty()) return DrawFormat::kSvg;
  absl::StatusOr<DrawFormat> from_path = DrawFormatForPath(path);
  if (!from_path.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(from_path.status().message(), "; give the format by name"));
  }
  return from_path;
}

bool IsBinaryFormat(DrawFormat format) {
  return format == DrawFormat::kPng || format == DrawFormat::kPdf;
}

absl::StatusOr<std::string> DrawOpGraph(const OpGraph& graph, const DrawOptions& options) {
  if (kBuiltinPluginsOnly &&
      (options.format == DrawFormat::kPng || options.format == DrawFormat::kPdf)) {
    return absl::UnimplementedError(absl::StrCat(
        "this build of tracetorch draws svg and dot only, not ", RendererName(options.format),
        " (Graphviz's core and dot-layout plugins are linked in, as in the wheel: "
        "TRACETORCH_GRAPHVIZ_PLUGINS=builtin); draw svg, or build from source against the "
        "system's Graphviz for png and pdf"));
  }
  absl::StatusOr<OpGraphView> view = BuildOpGraphView(graph, options.view);
  if (!view.ok()) return view.status();
  absl::MutexLock lock(&graphviz_mu);
  std::string errors;
  graphviz_errors = &errors;
  agusererrf previous = agseterrf(&CollectError);
  // Warnings are not failures; keep them off the user's stderr.
  const agerrlevel_t previous_level = agseterr(AGERR);
  Agraph_t* g = BuildGraph(*view, graph, options.view.module, options.direction);
  absl::StatusOr<std::string> out;
  if (options.format == DrawFormat::kDot) {
    out = WriteDot(g);
  } else {
    if (graphviz_context == nullptr) graphviz_context = NewGraphvizContext();
    if (gvLayout(graphviz_context, g, "dot") != 0) {
      out = absl::InternalError(absl::StrCat("Graphviz could not lay the graph out: ", errors));
    } else {
      char* data = nullptr;
      unsigned int length = 0;
      if (gvRenderData(graphviz_context, g, RendererName(options.format), &data, &length) != 0) {
        out = absl::InternalError(
            absl::StrCat("Graphviz could not render ", RendererName(options.format), ": ", errors));
      } else {
        out = std::string(data, length);
      }
      if (data != nullptr) gvFreeRenderData(data);
      gvFreeLayout(graphviz_context, g);
    }
  }
  agclose(g);
  agseterrf(previous);
  agseterr(previous_level);
  graphviz_errors = nullptr;
  return out;
}

absl::Status DrawOpGraphToFile(const OpGraph& graph, const DrawOptions& options,
                               const std::string& path) {
  absl::StatusOr<std::string> bytes = DrawOpGraph(graph, options);
  if (!bytes.ok()) return bytes.status();
  return WriteFileAtomic(path, *bytes);
}

}  // namespace tracetorch::draw
