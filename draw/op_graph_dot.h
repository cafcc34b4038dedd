// Pictures of an op graph (trace/op_graph.h), laid out and rendered by Graphviz's libraries
// (libcgraph builds the graph, libgvc lays it out with `dot` and renders it; no subprocess).
// What is drawn is draw/op_graph_view.h's view: ops, collapsed module passes and folded
// repeated blocks as nodes, open module passes as nested clusters.
//
// Node label: title (op label or module address), detail (function or class), output shape, and
// for an unhealthy output a mark: red for NaN/Inf ("NaN 12"), grey for an all-zero output ("dead
// (all zero)"). Graph inputs and outputs are ovals, ops boxes, collapsed passes 3-D boxes, folded
// runs double-bordered with "×N". Edges carry the tensor's shape where it changes.
//
// Big graphs (over kLargeGraphNodes nodes) are laid out with bounded effort (newrank, nslimit,
// mclimit, searchsize, straight splines), so that a few thousand nodes take seconds, not minutes.
//
// Example:
//   DrawOptions o;
//   o.view.collapse = Collapse::kAuto;
//   absl::StatusOr<std::string> svg = DrawOpGraph(graph, o);
//
// Thread-safe: Graphviz keeps global state, so calls are serialised by a process-wide mutex.
// Errors: InvalidArgument for an unknown module or option; Internal when Graphviz fails; the
// file variant adds the errors of writing `path` (trace/atomic_file.h).
#ifndef TRACETORCH_DRAW_OP_GRAPH_DOT_H_
#define TRACETORCH_DRAW_OP_GRAPH_DOT_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "draw/op_graph_view.h"
#include "trace/op_graph.h"

namespace tracetorch::draw {

enum class DrawFormat {
  kSvg,
  kPng,
  kPdf,
  kDot,  // The graph before layout, as DOT text (what `dot` would read).
};
enum class Direction { kTopBottom, kLeftRight };

// "svg", "png", "pdf", "dot" / "TB", "LR"; InvalidArgument naming the choices otherwise.
absl::StatusOr<DrawFormat> ParseDrawFormat(std::string_view text);
absl::StatusOr<Direction> ParseDirection(std::string_view text);
// The format a file name asks for by its extension ("x.png"; ".gv" is dot); InvalidArgument when
// it has none or an unknown one.
absl::StatusOr<DrawFormat> DrawFormatForPath(std::string_view path);
// The one rule both doors (`tracetorch graph`, OpTrace.draw) follow: the format given by name
// when `format` is not empty; else the one `path`'s extension asks for when a path is given (its
// errors say to give the format by name); else svg.
//   ResolveDrawFormat("", "g.png") == kPng;  ResolveDrawFormat("pdf", "g.png") == kPdf
absl::StatusOr<DrawFormat> ResolveDrawFormat(std::string_view format, std::string_view path);
// Whether pictures of `format` are binary (png, pdf) rather than text (svg, dot).
bool IsBinaryFormat(DrawFormat format);

inline constexpr int kLargeGraphNodes = 300;

struct DrawOptions {
  ViewOptions view;
  DrawFormat format = DrawFormat::kSvg;
  Direction direction = Direction::kTopBottom;
};

// The picture's bytes (text for svg and dot, binary for png and pdf).
absl::StatusOr<std::string> DrawOpGraph(const OpGraph& graph, const DrawOptions& options);

// Draws into `path` (written atomically).
absl::Status DrawOpGraphToFile(const OpGraph& graph, const DrawOptions& options,
                               const std::string& path);

}  // namespace tracetorch::draw

#endif  // TRACETORCH_DRAW_OP_GRAPH_DOT_H_
