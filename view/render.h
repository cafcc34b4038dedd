// Rendering of traces and diffs as text, for a terminal (Style::Rich) or a pipe (Style::Plain).
//
// The renderers take data, not files: a TraceRecord or TraceDiff from any source (a file today; a
// daemon snapshot later), so `inspect`, `watch` and their remote variants share them. Every
// function returns the full text, ending with a newline, and writes nothing.
//
// Text read from the trace (names, messages) is passed through Sanitize (text.h).
//
// Thread-compatible; no shared state.
#ifndef TRACETORCH_VIEW_RENDER_H_
#define TRACETORCH_VIEW_RENDER_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "trace/diff.h"
#include "trace/record.h"
#include "view/filter.h"
#include "view/text.h"

namespace tracetorch::view {

// The "Model Summary" panel: Model, PyTorch, Layers, Forward passes (the most of any layer),
// Parameters (sum of the layers' direct parameters), Execution Time, and NaN origin when the record
// has one. With `shown_layers`, the Layers row reads "11 (3 shown)".
std::string RenderModelPanel(const TraceRecord& record, const Style& style,
                             std::optional<size_t> shown_layers = std::nullopt);

// One line of the layer tree, without the tree guides, e.g.
//   fc (Linear) | Params: 4.2K | Latency: 0.034ms mean (0.029ms-0.048ms x20) | grad_norm: 0.2969 |
//   Output: [16, 64] | std: 0.32 [ok]
// (one line; `|` is `│` and `[ok]` is `✓` in rich style). The mark is the worst severity among
// `anomalies` whose layer is `layer.full_name`: ✓/[ok] none, ℹ/[info], ⚠/[warning], ✗/[critical].
std::string RenderLayerLine(const LayerTrace& layer, std::string_view display_name,
                            const std::vector<Anomaly>& anomalies, const Style& style);

// "Layers" followed by the tree of record.layers nested by full_name (tree.h), each recorded layer
// rendered by RenderLayerLine with record.warnings; structural ancestors show their name only.
std::string RenderLayerTree(const TraceRecord& record, const Style& style);

// The "Warnings & Anomalies" table (Severity, Layer, Message) in the given order, or
// "✓ No anomalies detected" when `anomalies` is empty.
std::string RenderAnomalies(const std::vector<Anomaly>& anomalies, const Style& style);

// The op where the NaN entered and its parents (Op, Function, Module, Output shape, Output stats),
// from the op graph a TraceSession(ops="on_nan") kept (record.op_graph); "" when the record
// has none.
std::string RenderNanOriginOp(const TraceRecord& record, const Style& style);

// `tracetorch inspect`: the panel of the whole record, then (when the record kept an op graph)
// RenderNanOriginOp, then the tree and the anomalies of the layers `filter` selects
// (ApplyFilter), separated by blank lines.
std::string RenderInspect(const TraceRecord& record, const LayerFilter& filter, const Style& style);

// `tracetorch summary`: the panel, then "Anomalies: 0 critical, 1 warning, 0 info".
std::string RenderSummary(const TraceRecord& record, const Style& style);

// `tracetorch diff`: the "Trace Diff" panel (Baseline, Current, Critical, Warnings), the entries
// table (Severity, Kind, Layer, Message) or "No changes detected between traces.", and a verdict
// line.
std::string RenderDiff(const TraceDiff& diff, const Style& style);

}  // namespace tracetorch::view

#endif  // TRACETORCH_VIEW_RENDER_H_
