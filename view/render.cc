#include "view/render.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trace/format.h"
#include "trace/forward_passes.h"
#include "trace/op_graph.h"
#include "view/labels.h"
#include "view/tree.h"

namespace tracetorch::view {
namespace {

std::string Separator(const Style& style) {
  return absl::StrCat(" ", Paint(Glyph(style, "│", "|"), Color::kDim, style), " ");
}

AnomalySeverity ToAnomalySeverity(DiffSeverity severity) {
  switch (severity) {
    case DiffSeverity::kCritical:
      return AnomalySeverity::kCritical;
    case DiffSeverity::kWarning:
      return AnomalySeverity::kWarning;
    case DiffSeverity::kInfo:
      return AnomalySeverity::kInfo;
  }
  return AnomalySeverity::kInfo;
}

// "⚠ warning" (rich, coloured) or "warning" (plain), for the Severity column.
std::string SeverityCell(AnomalySeverity severity, const Style& style) {
  const std::string_view name = ToString(severity);
  if (!style.unicode) return Paint(name, SeverityColor(severity), style);
  return Paint(absl::StrCat(std::string(SeveritySymbol(severity)), " ", std::string(name)),
               SeverityColor(severity), style);
}

std::optional<AnomalySeverity> WorstFor(std::string_view layer,
                                        const std::vector<Anomaly>& anomalies) {
  std::optional<AnomalySeverity> worst;
  for (const Anomaly& anomaly : anomalies) {
    if (anomaly.layer != layer) continue;
    if (!worst.has_value() || static_cast<int>(anomaly.severity) > static_cast<int>(*worst)) {
      worst = anomaly.severity;
    }
  }
  return worst;
}

std::optional<std::string> LatencyText(const LayerTrace& layer) {
  if (layer.forward_count > 1 && layer.latency_ms_mean.has_value() &&
      layer.latency_ms_min.has_value() && layer.latency_ms_max.has_value()) {
    return absl::StrCat("Latency: ", FormatMs(*layer.latency_ms_mean), " mean (",
                        FormatMs(*layer.latency_ms_min), "-", FormatMs(*layer.latency_ms_max), " x",
                        layer.forward_count, ")");
  }
  const std::optional<double> latency =
      layer.latency_ms.has_value() ? layer.latency_ms : layer.latency_ms_mean;
  if (!latency.has_value()) return std::nullopt;
  return absl::StrCat("Latency: ", FormatMs(*latency));
}

std::string LayerLine(const LayerTrace& layer, std::string_view display_name,
                      std::optional<AnomalySeverity> worst, const Style& style) {
  std::vector<std::string> parts;
  std::string head = Paint(Sanitize(display_name), Color::kBold, style);
  if (!layer.type.empty()) {
    absl::StrAppend(&head, " ",
                    Paint(absl::StrCat("(", Sanitize(layer.type), ")"), Color::kCyan, style));
  }
  parts.push_back(std::move(head));
  if (layer.params > 0) parts.push_back(absl::StrCat("Params: ", FormatCount(layer.params)));
  if (std::optional<std::string> latency = LatencyText(layer)) parts.push_back(*std::move(latency));
  if (layer.grad_norm.has_value()) {
    parts.push_back(absl::StrCat("grad_norm: ", FormatFixed(*layer.grad_norm, 4)));
  }
  if (layer.has_nan) parts.push_back(Paint("NaN in output", Color::kRed, style));
  // A mask's -inf is no trouble (trace/nonfinite.h): said, not painted.
  if (layer.has_inf) {
    parts.push_back(layer.inf_in_masks_only ? std::string("-inf masks in output")
                                            : Paint("Inf in output", Color::kRed, style));
  }
  if (layer.grad_has_nan) parts.push_back(Paint("NaN in gradient", Color::kRed, style));
  if (layer.outputs.empty()) parts.push_back("Output: none");
  for (const TensorInfo& output : layer.outputs) {
    parts.push_back(absl::StrCat("Output: ", FormatShape(output.shape)));
    if (output.stats.has_value() && output.stats->std.has_value()) {
      parts.push_back(absl::StrCat("std: ", FormatFixed(*output.stats->std, 2)));
    }
  }
  return absl::StrCat(absl::StrJoin(parts, Separator(style)), " ", SeverityMark(worst, style));
}

void AppendTree(const std::vector<LayerTreeNode>& nodes, const std::string& prefix,
                const absl::flat_hash_map<std::string, AnomalySeverity>& worst, const Style& style,
                std::string* out) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    const LayerTreeNode& node = nodes[i];
    const bool last = i + 1 == nodes.size();
    absl::StrAppend(out, prefix,
                    Paint(last ? Glyph(style, "└── ", "\\-- ") : Glyph(style, "├── ", "+-- "),
                          Color::kDim, style));
    if (node.layer == nullptr) {
      absl::StrAppend(out, Paint(Sanitize(node.name), Color::kDim, style), "\n");
    } else {
      auto it = worst.find(node.layer->full_name);
      const std::optional<AnomalySeverity> severity =
          it == worst.end() ? std::nullopt : std::optional<AnomalySeverity>(it->second);
      absl::StrAppend(out, LayerLine(*node.layer, node.name, severity, style), "\n");
    }
    const std::string child_prefix = absl::StrCat(
        prefix, last ? "    " : Paint(Glyph(style, "│   ", "|   "), Color::kDim, style));
    AppendTree(node.children, child_prefix, worst, style, out);
  }
}

}  // namespace

std::string RenderModelPanel(const TraceRecord& record, const Style& style,
                             std::optional<size_t> shown_layers) {
  const TraceMetadata& meta = record.metadata;
  int64_t params = 0;
  for (const LayerTrace& layer : record.layers) params += layer.params;

  Panel panel{.title = "Model Summary", .rows = {}};
  panel.rows.emplace_back("Model",
                          meta.model_name.empty() ? "(unnamed)" : Sanitize(meta.model_name));
  panel.rows.emplace_back(
      "PyTorch", meta.pytorch_version.empty() ? "unknown" : Sanitize(meta.pytorch_version));
  std::string layers = absl::StrCat(record.layers.size());
  if (shown_layers.has_value()) absl::StrAppend(&layers, " (", *shown_layers, " shown)");
  panel.rows.emplace_back("Layers", std::move(layers));
  panel.rows.emplace_back("Forward passes", absl::StrCat(ForwardPasses(record)));
  panel.rows.emplace_back("Parameters", FormatCount(params));
  panel.rows.emplace_back("Execution Time",
                          meta.total_time_ms.has_value() ? FormatMs(*meta.total_time_ms) : "n/a");
  if (meta.nan_origin.has_value()) {
    const NanOrigin& origin = *meta.nan_origin;
    panel.rows.emplace_back("NaN origin",
                            absl::StrCat(Sanitize(origin.layer), " at step ", origin.step, " (",
                                         origin.is_nan ? "NaN" : "Inf",
                                         origin.backward ? ", in the backward" : "", ")"));
    if (!origin.op.empty()) {
      panel.rows.emplace_back("NaN origin op",
                              absl::StrCat(Sanitize(origin.op), " (", Sanitize(origin.op_func),
                                           ") in ", Sanitize(origin.op_module)));
    }
  }
  return RenderPanel(panel, style);
}

std::string RenderLayerLine(const LayerTrace& layer, std::string_view display_name,
                            const std::vector<Anomaly>& anomalies, const Style& style) {
  return LayerLine(layer, display_name, WorstFor(layer.full_name, anomalies), style);
}

std::string RenderLayerTree(const TraceRecord& record, const Style& style) {
  std::string out = absl::StrCat(Paint("Layers", Color::kBold, style), "\n");
  if (record.layers.empty()) {
    absl::StrAppend(&out, "(no layers)\n");
    return out;
  }
  AppendTree(BuildLayerTree(record.layers), "", WorstSeverityByLayer(record.warnings), style, &out);
  return out;
}

std::string RenderAnomalies(const std::vector<Anomaly>& anomalies, const Style& style) {
  if (anomalies.empty()) {
    return absl::StrCat(Paint(Glyph(style, "✓ No anomalies detected", "No anomalies detected"),
                              Color::kGreen, style),
                        "\n");
  }
  Table table{
      .title = "Warnings & Anomalies", .header = {"Severity", "Layer", "Message"}, .rows = {}};
  for (const Anomaly& anomaly : anomalies) {
    table.rows.push_back({SeverityCell(anomaly.severity, style), Sanitize(anomaly.layer),
                          Sanitize(anomaly.message)});
  }
  return RenderTable(table, style);
}

namespace {

// "nan 12, inf 0" (and the mean when statistics were captured) of an op's first output.
std::string StatsCell(const OpNode& op) {
  if (op.outputs.empty()) return "-";
  const TensorInfo& t = op.outputs[0];
  if (!t.stats && !t.nonfinite) return "-";
  std::string out = absl::StrCat("nan ", NanCount(t), ", inf ", InfCount(t));
  if (t.stats && t.stats->mean) absl::StrAppend(&out, ", mean ", FormatFixed(*t.stats->mean, 4));
  return out;
}

}  // namespace

std::string RenderNanOriginOp(const TraceRecord& record, const Style& style) {
  if (record.op_graph == nullptr) return "";
  const OpGraph* graph = record.op_graph.get();
  const std::string step = graph->step ? absl::StrCat(" at step ", *graph->step) : "";
  if (!graph->nan_origin) {
    const bool backward =
        record.metadata.nan_origin.has_value() && record.metadata.nan_origin->backward;
    return absl::StrCat("NaN origin op: none in the op graph kept", step, " (", graph->ops.size(),
                        " ops): ",
                        backward ? "the NaN was born in the backward, and no op of its layer held "
                                   "a non-finite value in the forward"
                                 : "the non-finite value entered with an input",
                        "\n");
  }
  const OpNode& origin = graph->ops[*graph->nan_origin];
  Table table;
  table.title = absl::StrCat("NaN origin op", step, ": ", Sanitize(origin.label),
                             " and its parents (", graph->ops.size(), " ops kept)");
  table.header = {"Op", "Function", "Module", "Output", "Output stats"};
  auto row = [&](const OpNode& op, const char* role) {
    table.rows.push_back(
        {absl::StrCat(Sanitize(op.label), role), Sanitize(op.func_name),
         op.module_pass >= 0 ? Sanitize(graph->ModuleAddress(op.module_pass)) : "-",
         op.outputs.empty() ? "-" : FormatShape(op.outputs[0].shape), StatsCell(op)});
  };
  row(origin, " (origin)");
  for (int32_t p : origin.parents) row(graph->ops[p], "");
  return RenderTable(table, style);
}

std::string RenderInspect(const TraceRecord& record, const LayerFilter& filter,
                          const Style& style) {
  const std::string origin_op = RenderNanOriginOp(record, style);
  if (filter.empty()) {
    return absl::StrCat(RenderModelPanel(record, style), "\n",
                        origin_op.empty() ? "" : absl::StrCat(origin_op, "\n"),
                        RenderLayerTree(record, style), "\n",
                        RenderAnomalies(record.warnings, style));
  }
  const TraceRecord shown = ApplyFilter(record, filter);
  std::string tree = shown.layers.empty() ? absl::StrCat(Paint("Layers", Color::kBold, style), "\n",
                                                         kNoLayersMatched, "\n")
                                          : RenderLayerTree(shown, style);
  return absl::StrCat(RenderModelPanel(record, style, shown.layers.size()), "\n",
                      origin_op.empty() ? "" : absl::StrCat(origin_op, "\n"), tree, "\n",
                      RenderAnomalies(shown.warnings, style));
}

std::string RenderSummary(const TraceRecord& record, const Style& style) {
  int counts[3] = {0, 0, 0};  // Indexed by AnomalySeverity.
  for (const Anomaly& anomaly : record.warnings) ++counts[static_cast<int>(anomaly.severity)];
  auto count = [&](AnomalySeverity severity) {
    const int n = counts[static_cast<int>(severity)];
    const std::string text = absl::StrCat(n, " ", std::string(ToString(severity)));
    return n > 0 ? Paint(text, SeverityColor(severity), style) : text;
  };
  return absl::StrCat(RenderModelPanel(record, style),
                      "Anomalies: ", count(AnomalySeverity::kCritical), ", ",
                      count(AnomalySeverity::kWarning), ", ", count(AnomalySeverity::kInfo), "\n");
}

std::string RenderDiff(const TraceDiff& diff, const Style& style) {
  const int critical = diff.critical_count();
  const int warnings = diff.warning_count();
  Panel panel{.title = "Trace Diff", .rows = {}};
  panel.rows.emplace_back("Baseline", Sanitize(diff.baseline_model));
  panel.rows.emplace_back("Current", Sanitize(diff.current_model));
  panel.rows.emplace_back("Critical", absl::StrCat(critical));
  panel.rows.emplace_back("Warnings", absl::StrCat(warnings));
  std::string out = RenderPanel(panel, style);
  out.push_back('\n');

  if (diff.entries.empty()) {
    absl::StrAppend(&out, "No changes detected between traces.\n");
  } else {
    Table table{
        .title = "Diff entries", .header = {"Severity", "Kind", "Layer", "Message"}, .rows = {}};
    for (const DiffEntry& entry : diff.entries) {
      table.rows.push_back({SeverityCell(ToAnomalySeverity(entry.severity), style),
                            std::string(ToString(entry.kind)), Sanitize(entry.layer),
                            Sanitize(entry.message)});
    }
    absl::StrAppend(&out, RenderTable(table, style));
  }
  out.push_back('\n');

  if (diff.has_regressions()) {
    const std::string counts = absl::StrCat(critical, " critical, ", warnings, " warning(s)");
    absl::StrAppend(
        &out,
        style.unicode
            ? Paint(absl::StrCat("✗ ", counts, " — regressions detected."), Color::kRed, style)
            : Paint(absl::StrCat("FAIL: ", counts, " - regressions detected."), Color::kRed, style),
        "\n");
  } else {
    absl::StrAppend(
        &out,
        Paint(Glyph(style, "✓ No regressions detected.", "OK: no regressions detected."),
              Color::kGreen, style),
        "\n");
  }
  return out;
}

}  // namespace tracetorch::view
