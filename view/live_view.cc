#include "view/live_view.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "trace/format.h"
#include "view/labels.h"
#include "view/render.h"
#include "view/tree.h"

namespace tracetorch::view {
namespace {

// The widest label column before the values start (longer labels push their values right).
constexpr size_t kMaxLabelColumn = 56;

std::string PadLeft(std::string_view text, size_t width) {
  const size_t shown = DisplayWidth(text);
  if (shown >= width) return std::string(text);
  return absl::StrCat(std::string(width - shown, ' '), std::string(text));
}

std::string Dot(const Style& style) { return GlyphString(style, " · ", " - "); }

// "1.2e-05", "0.3214", "26.53": four significant digits, for std and gradient norms.
std::string Compact(double value) {
  if (!std::isfinite(value)) return std::isnan(value) ? "NaN" : (value > 0 ? "Inf" : "-Inf");
  return absl::StrFormat("%.4g", value);
}

std::optional<double> MeanLatency(const LayerTrace& layer) {
  return layer.latency_ms_mean.has_value() ? layer.latency_ms_mean : layer.latency_ms;
}

std::optional<double> OutputStd(const LayerTrace& layer) {
  if (layer.outputs.empty() || !layer.outputs.front().stats.has_value()) return std::nullopt;
  return layer.outputs.front().stats->std;
}

std::string StatusText(const StatusLine& status, const Style& style) {
  switch (status.kind) {
    case StatusLine::Kind::kOk:
      return Paint(absl::StrCat(GlyphString(style, "● ", ""), status.text), Color::kGreen, style);
    case StatusLine::Kind::kWaiting:
      return Paint(absl::StrCat(GlyphString(style, "⟳ ", ""), status.text), Color::kYellow, style);
    case StatusLine::Kind::kDone:
      return Paint(absl::StrCat(GlyphString(style, "■ ", ""), status.text), Color::kBlue, style);
    case StatusLine::Kind::kProblem:
      return Paint(absl::StrCat(GlyphString(style, "✗ ", ""), status.text), Color::kRed, style);
  }
  return status.text;
}

std::string UpdatedText(uint64_t updates, const std::optional<absl::Time>& updated_at) {
  std::string out = absl::StrCat("updates ", updates);
  if (updated_at.has_value()) {
    absl::StrAppend(&out, ", last at ",
                    absl::FormatTime("%H:%M:%S", *updated_at, absl::LocalTimeZone()));
  }
  return out;
}

// "events 1234 · dropped 0 · rejected 0".
std::string CountersText(const SessionSummary& session, const Style& style) {
  std::string dropped = absl::StrCat("dropped ", session.dropped_events);
  if (session.dropped_events > 0) dropped = Paint(dropped, Color::kYellow, style);
  std::string rejected = absl::StrCat("rejected ", session.rejected_events);
  if (session.rejected_events > 0) rejected = Paint(rejected, Color::kYellow, style);
  return absl::StrCat("events ", session.events, Dot(style), dropped, Dot(style), rejected);
}

// ---- The layer tree ---------------------------------------------------------------------------

struct TreeRow {
  std::string label;  // Guides, name and type (may hold escape codes).
  size_t label_width = 0;
  const LayerTrace* layer = nullptr;
};

void CollectRows(const std::vector<LayerTreeNode>& nodes, const std::string& prefix,
                 size_t prefix_width, const Style& style, std::vector<TreeRow>* rows) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    const LayerTreeNode& node = nodes[i];
    const bool last = i + 1 == nodes.size();
    TreeRow row;
    std::string label = absl::StrCat(prefix, Paint(last ? GlyphString(style, "└── ", "\\-- ")
                                                        : GlyphString(style, "├── ", "+-- "),
                                                   Color::kDim, style));
    size_t width = prefix_width + 4;
    const std::string name = Sanitize(node.name);
    width += DisplayWidth(name);
    if (node.layer == nullptr) {
      absl::StrAppend(&label, Paint(name, Color::kDim, style));
    } else {
      absl::StrAppend(&label, Paint(name, Color::kBold, style));
      if (!node.layer->type.empty()) {
        const std::string type = absl::StrCat(" (", Sanitize(node.layer->type), ")");
        width += DisplayWidth(type);
        absl::StrAppend(&label, Paint(type, Color::kCyan, style));
      }
    }
    row.label = std::move(label);
    row.label_width = width;
    row.layer = node.layer;
    rows->push_back(std::move(row));
    const std::string child_prefix = absl::StrCat(
        prefix, last ? "    " : Paint(GlyphString(style, "│   ", "|   "), Color::kDim, style));
    CollectRows(node.children, child_prefix, prefix_width + 4, style, rows);
  }
}

// One metric: "lat 0.034ms ▁▂▃" with the value right-aligned and, when `points` > 0, the
// sparkline of `series` padded to `points` columns (blank without a series) so the columns line up
// from layer to layer.
std::string MetricCell(std::string_view name, std::optional<double> value, bool as_ms,
                       const std::vector<double>* series, const std::vector<bool>& non_finite,
                       size_t points, const Style& style) {
  constexpr size_t kValueWidth = 9;
  std::string text = "-";
  if (value.has_value()) text = as_ms ? FormatMs(*value) : Compact(*value);
  std::string out = absl::StrCat(Paint(name, Color::kDim, style), " ", PadLeft(text, kValueWidth));
  if (points > 0) {
    static const std::vector<double> kNone;
    const std::vector<double>& values = series != nullptr ? *series : kNone;
    const size_t shown = std::min(values.size(), points);
    absl::StrAppend(&out, " ", Sparkline(values, non_finite, points, style),
                    std::string(points - shown, ' '));
  }
  return out;
}

// The values of one layer; `points`: sparkline length (0: none).
std::string LayerValues(const LayerTrace& layer, const LayerSeries* series,
                        std::optional<AnomalySeverity> worst, size_t points, const Style& style) {
  static const std::vector<bool> kNoFlags;
  const std::vector<bool>& flags = series != nullptr ? series->non_finite : kNoFlags;
  std::vector<std::string> cells;
  cells.push_back(MetricCell("lat", MeanLatency(layer), /*as_ms=*/true,
                             series != nullptr ? &series->latency_ms : nullptr, kNoFlags, points,
                             style));
  cells.push_back(MetricCell("std", OutputStd(layer), /*as_ms=*/false,
                             series != nullptr ? &series->output_std : nullptr, flags, points,
                             style));
  cells.push_back(MetricCell("grad", layer.grad_norm, /*as_ms=*/false,
                             series != nullptr ? &series->grad_norm : nullptr, flags, points,
                             style));
  std::string out = absl::StrJoin(cells, "  ");
  absl::StrAppend(&out, " ", SeverityMark(worst, style));
  if (layer.has_nan) absl::StrAppend(&out, " ", Paint("NaN out", Color::kRed, style));
  if (layer.has_inf && !layer.inf_in_masks_only) {
    absl::StrAppend(&out, " ", Paint("Inf out", Color::kRed, style));
  }
  if (layer.grad_has_nan) absl::StrAppend(&out, " ", Paint("NaN grad", Color::kRed, style));
  return out;
}

// Sparkline length for a tree whose labels take `column` columns: options.spark_points, fewer
// when the terminal is too narrow for three of them, none below 4.
size_t SparkPoints(size_t column, const LiveViewOptions& options) {
  if (options.width == 0) return options.spark_points;
  // Gap, three "name value" cells and their separators, the mark and a NaN flag.
  constexpr size_t kFixed = 2 + (4 + 9) + (4 + 9) + (5 + 9) + 2 * 2 + 12;
  const size_t used = column + kFixed;
  if (options.width <= used) return 0;
  const size_t per_metric = (options.width - used) / 3;
  const size_t points = per_metric > 0 ? std::min(per_metric - 1, options.spark_points) : 0;
  return points >= 4 ? points : 0;
}

std::string RenderLiveTree(const TraceRecord& record, const LayerHistoryMap* history,
                           const LiveViewOptions& options) {
  const Style& style = options.style;
  std::string out = absl::StrCat(Paint("Layers", Color::kBold, style), "\n");
  std::vector<TreeRow> rows;
  CollectRows(BuildLayerTree(record.layers), "", 0, style, &rows);
  size_t column = 0;
  for (const TreeRow& row : rows) column = std::max(column, row.label_width);
  column = std::min(column, kMaxLabelColumn);
  const size_t points = history != nullptr ? SparkPoints(column, options) : 0;

  const absl::flat_hash_map<std::string, AnomalySeverity> worst =
      WorstSeverityByLayer(record.warnings);
  for (const TreeRow& row : rows) {
    absl::StrAppend(&out, row.label);
    if (row.layer != nullptr) {
      const size_t pad = row.label_width < column ? column - row.label_width : 0;
      const LayerSeries* series = nullptr;
      if (history != nullptr) {
        auto it = history->find(row.layer->full_name);
        if (it != history->end()) series = &it->second;
      }
      auto w = worst.find(row.layer->full_name);
      std::optional<AnomalySeverity> severity;
      if (w != worst.end()) severity = w->second;
      absl::StrAppend(&out, std::string(pad + 2, ' '),
                      LayerValues(*row.layer, series, severity, points, style));
    }
    out.push_back('\n');
  }
  return out;
}

// ---- The job view -----------------------------------------------------------------------------

std::optional<int> DetailInt(const Anomaly& anomaly, std::string_view key) {
  const DetailValue* value = FindDetail(anomaly.details, key);
  if (value == nullptr) return std::nullopt;
  if (const int64_t* i = std::get_if<int64_t>(value)) return static_cast<int>(*i);
  if (const double* d = std::get_if<double>(value)) return static_cast<int>(*d);
  return std::nullopt;
}

std::string DetailString(const Anomaly& anomaly, std::string_view key) {
  const DetailValue* value = FindDetail(anomaly.details, key);
  if (value == nullptr) return "";
  if (const std::string* s = std::get_if<std::string>(value)) return *s;
  return "";
}

std::string RankLine(const RankView& rank, const Style& style) {
  const SessionSummary& s = rank.session;
  std::string state = s.state;
  if (state == "aborted" || state == "stalled") state = Paint(state, Color::kRed, style);
  return absl::StrCat("rank ", rank.rank, ": ", Sanitize(s.session_id), Dot(style), "pid ", s.pid,
                      s.host.empty() ? "" : absl::StrCat(" on ", Sanitize(s.host)), Dot(style),
                      state, Dot(style), CountersText(s, style),
                      s.position.empty() ? "" : absl::StrCat(Dot(style), Sanitize(s.position)));
}

// The text of a JSON string literal (a metadata extra's value); the text as it is when it is not
// one.
std::string JsonStringText(std::string_view json) {
  if (json.size() < 2 || json.front() != '"' || json.back() != '"') return std::string(json);
  std::string out;
  for (size_t i = 1; i + 1 < json.size(); ++i) {
    if (json[i] != '\\' || i + 2 >= json.size()) {
      out.push_back(json[i]);
      continue;
    }
    const char c = json[++i];
    switch (c) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'u':
        out.push_back('?');  // Sanitize()d anyway; names are ASCII in practice.
        i += 4;
        break;
      default:
        out.push_back(c);  // \" \\ \/
    }
  }
  return out;
}

}  // namespace

std::string Sparkline(const std::vector<double>& values, const std::vector<bool>& non_finite,
                      size_t points, const Style& style) {
  if (values.empty() || points == 0) return "";
  static constexpr std::string_view kRich[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  static constexpr std::string_view kPlain = "_.-=+*#@";
  const size_t begin = values.size() > points ? values.size() - points : 0;
  double lo = INFINITY;
  double hi = -INFINITY;
  for (size_t i = begin; i < values.size(); ++i) {
    // Flagged steps are drawn as '!' and left out of the scale, so one blow-up does not flatten
    // the rest of the line.
    if (!std::isfinite(values[i]) || (i < non_finite.size() && non_finite[i])) continue;
    lo = std::min(lo, values[i]);
    hi = std::max(hi, values[i]);
  }
  std::string out;
  for (size_t i = begin; i < values.size(); ++i) {
    if (i < non_finite.size() && non_finite[i]) {
      absl::StrAppend(&out, Paint("!", Color::kRed, style));
      continue;
    }
    const double v = values[i];
    if (!std::isfinite(v)) {
      out.push_back(' ');
      continue;
    }
    int level = 3;  // All equal: the middle.
    if (hi > lo) {
      level = static_cast<int>(std::lround((v - lo) / (hi - lo) * 7.0));
      level = std::clamp(level, 0, 7);
    }
    if (style.unicode) {
      out.append(kRich[level]);
    } else {
      out.push_back(kPlain[static_cast<size_t>(level)]);
    }
  }
  return out;
}

std::vector<Anomaly> LiveAnomalyOrder(const TraceRecord& record) {
  const std::optional<NanOrigin>& origin = record.metadata.nan_origin;
  auto rank = [&origin](const Anomaly& a) {
    if (origin.has_value() && a.layer == origin->layer) {
      const bool activation =
          a.type == AnomalyType::kNanActivation || a.type == AnomalyType::kInfActivation;
      return activation ? 0 : 1;
    }
    return 2;
  };
  std::vector<Anomaly> out = record.warnings;
  std::stable_sort(out.begin(), out.end(), [&rank](const Anomaly& a, const Anomaly& b) {
    const int ra = rank(a);
    const int rb = rank(b);
    if (ra != rb) return ra < rb;
    if (ra < 2) return false;
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  });
  return out;
}

std::string RenderLiveBody(const TraceRecord& record, const LayerHistoryMap* history,
                           const LiveViewOptions& options) {
  const Style& style = options.style;
  const bool filtered = !options.filter.empty();
  const TraceRecord shown = filtered ? ApplyFilter(record, options.filter) : TraceRecord{};
  const TraceRecord& view = filtered ? shown : record;

  std::string out = RenderModelPanel(
      record, style, filtered ? std::optional<size_t>(view.layers.size()) : std::nullopt);
  out.push_back('\n');

  // Anomalies come before the tree, so a tall tree cut at the bottom of a terminal never hides
  // them. The NaN origin leads (it names where the first non-finite value appeared: where a
  // person starts looking), then the table in LiveAnomalyOrder.
  if (const std::optional<NanOrigin>& origin = record.metadata.nan_origin; origin.has_value()) {
    absl::StrAppend(
        &out,
        Paint(
            absl::StrCat(GlyphString(style, "✗ ", "!! "), "NaN origin: ", Sanitize(origin->layer),
                         " at step ", origin->step, " (first ", origin->is_nan ? "NaN" : "Inf", ")",
                         // The op, once TraceSession(ops="on_nan") has named it.
                         origin->op.empty() ? ""
                                            : absl::StrCat(", op ", Sanitize(origin->op), " (",
                                                           Sanitize(origin->op_func), ") in ",
                                                           Sanitize(origin->op_module))),
            Color::kRed, style),
        "\n");
  }
  // Where the process is (a watch file of an agent with a flight recorder): "flight_position".
  if (const std::string* where = record.metadata.FindExtra("flight_position"); where != nullptr) {
    const std::string* stalled = record.metadata.FindExtra("flight_stalled");
    const std::string* age = record.metadata.FindExtra("flight_position_age_s");
    const bool stuck = stalled != nullptr && *stalled == "true";
    absl::StrAppend(
        &out,
        Paint(absl::StrCat(
                  stuck ? "STALLED at " : "at ", Sanitize(JsonStringText(*where)),
                  stuck && age != nullptr ? absl::StrCat(", for ", Sanitize(*age), " s") : ""),
              stuck ? Color::kRed : Color::kDim, style),
        "\n");
  }
  TraceRecord ordered;
  ordered.metadata.nan_origin = record.metadata.nan_origin;
  ordered.warnings = view.warnings;
  absl::StrAppend(&out, RenderAnomalies(LiveAnomalyOrder(ordered), style));
  out.push_back('\n');

  if (view.layers.empty()) {
    absl::StrAppend(&out, Paint("Layers", Color::kBold, style), "\n",
                    filtered ? absl::StrCat(kNoLayersMatched, "\n") : "(no layers)\n");
  } else {
    absl::StrAppend(&out, RenderLiveTree(view, history, options));
  }
  return out;
}

std::string RenderLiveFrame(const LiveFrame& frame, const LiveViewOptions& options) {
  const Style& style = options.style;
  std::string title = absl::StrCat("tracetorch watch", Dot(style), Sanitize(frame.target));
  if (frame.record != nullptr && !frame.record->metadata.model_name.empty()) {
    absl::StrAppend(&title, Dot(style), Sanitize(frame.record->metadata.model_name));
  }
  if (frame.session.has_value()) {
    const SessionSummary& s = *frame.session;
    absl::StrAppend(&title, Dot(style), "pid ", s.pid);
    if (!s.host.empty()) absl::StrAppend(&title, " on ", Sanitize(s.host));
    if (s.rank.has_value()) absl::StrAppend(&title, Dot(style), "rank ", *s.rank);
    absl::StrAppend(&title, Dot(style), s.state);
  }
  std::string out =
      absl::StrCat(Paint(title, Color::kBold, style), "\n", StatusText(frame.status, style), "\n");
  if (frame.session.has_value() && !frame.session->position.empty()) {
    const bool stalled = frame.session->state == "stalled";
    absl::StrAppend(
        &out,
        Paint(absl::StrCat(stalled ? "STALLED at " : "at ", Sanitize(frame.session->position)),
              stalled ? Color::kRed : Color::kDim, style),
        "\n");
  }
  std::string counters;
  if (frame.session.has_value()) {
    counters = absl::StrCat(CountersText(*frame.session, style), Dot(style));
  }
  absl::StrAppend(&out,
                  Paint(absl::StrCat(counters, UpdatedText(frame.updates, frame.updated_at),
                                     Dot(style), "Ctrl+C to quit"),
                        Color::kDim, style),
                  "\n\n");
  if (frame.record == nullptr) {
    absl::StrAppend(
        &out,
        GlyphString(style, "waiting for the first update…", "waiting for the first update..."),
        "\n");
  } else {
    absl::StrAppend(&out, RenderLiveBody(*frame.record, frame.history, options));
  }
  return TruncateLines(out, options.width, style);
}

std::string RenderJobFrame(const LiveJobFrame& frame, const LiveViewOptions& options) {
  const Style& style = options.style;
  std::string out = absl::StrCat(
      Paint(absl::StrCat("tracetorch watch", Dot(style), "job ", Sanitize(frame.job_id), Dot(style),
                         frame.ranks.size(), frame.ranks.size() == 1 ? " rank" : " ranks"),
            Color::kBold, style),
      "\n", StatusText(frame.status, style), "\n",
      Paint(
          absl::StrCat(UpdatedText(frame.updates, frame.updated_at), Dot(style), "Ctrl+C to quit"),
          Color::kDim, style),
      "\n\n");
  if (frame.ranks.empty()) {
    absl::StrAppend(
        &out,
        GlyphString(style, "waiting for the first update…", "waiting for the first update..."),
        "\n");
    return TruncateLines(out, options.width, style);
  }
  for (const RankView& rank : frame.ranks) absl::StrAppend(&out, RankLine(rank, style), "\n");
  out.push_back('\n');

  // (layer, rank, metric) named by a divergence.
  absl::flat_hash_set<std::string> flagged_cells;
  absl::flat_hash_set<std::string> flagged_layers;
  for (const Anomaly& d : frame.divergences) {
    flagged_layers.insert(d.layer);
    if (std::optional<int> r = DetailInt(d, "rank")) {
      flagged_cells.insert(absl::StrCat(d.layer, "\n", *r, "\n", DetailString(d, "metric")));
    }
  }
  if (frame.divergences.empty()) {
    absl::StrAppend(
        &out,
        Paint(GlyphString(style, "✓ No cross-rank divergence", "No cross-rank divergence"),
              Color::kGreen, style),
        "\n");
  } else {
    Table table{
        .title = "Cross-rank divergence", .header = {"Layer", "Rank", "Message"}, .rows = {}};
    for (const Anomaly& d : frame.divergences) {
      std::optional<int> r = DetailInt(d, "rank");
      table.rows.push_back({Sanitize(d.layer), r.has_value() ? absl::StrCat(*r) : "-",
                            Paint(Sanitize(d.message), Color::kYellow, style)});
    }
    absl::StrAppend(&out, RenderTable(table, style));
  }
  out.push_back('\n');

  // The union of the ranks' layers, first rank's order first; filtered.
  std::vector<LayerTrace> layers;
  absl::flat_hash_set<std::string> seen;
  for (const RankView& rank : frame.ranks) {
    for (const LayerTrace& layer : rank.record.layers) {
      if (!options.filter.Matches(layer)) continue;
      if (seen.insert(layer.full_name).second) layers.push_back(layer);
    }
  }
  std::vector<absl::flat_hash_map<std::string, const LayerTrace*>> by_name(frame.ranks.size());
  for (size_t i = 0; i < frame.ranks.size(); ++i) {
    for (const LayerTrace& layer : frame.ranks[i].record.layers) {
      by_name[i].emplace(layer.full_name, &layer);
    }
  }
  Table table{.title = "Layers by rank (latency / grad norm)", .header = {"Layer"}, .rows = {}};
  for (const RankView& rank : frame.ranks) table.header.push_back(absl::StrCat("rank ", rank.rank));
  std::vector<TreeRow> rows;
  CollectRows(BuildLayerTree(layers), "", 0, style, &rows);
  for (const TreeRow& row : rows) {
    std::vector<std::string> cells;
    std::string label = row.label;
    if (row.layer != nullptr && flagged_layers.contains(row.layer->full_name)) {
      absl::StrAppend(&label, " ", Paint(GlyphString(style, "⚠", "!"), Color::kYellow, style));
    }
    cells.push_back(std::move(label));
    for (size_t i = 0; i < frame.ranks.size(); ++i) {
      if (row.layer == nullptr) {
        cells.push_back("");
        continue;
      }
      auto it = by_name[i].find(row.layer->full_name);
      if (it == by_name[i].end()) {
        cells.push_back("-");
        continue;
      }
      const LayerTrace& layer = *it->second;
      const std::string key = absl::StrCat(layer.full_name, "\n", frame.ranks[i].rank, "\n");
      std::optional<double> latency = MeanLatency(layer);
      std::string lat = latency.has_value() ? FormatMs(*latency) : "-";
      if (flagged_cells.contains(absl::StrCat(key, "latency_ms"))) {
        lat = Paint(absl::StrCat(lat, GlyphString(style, "⚠", "!")), Color::kYellow, style);
      }
      std::string grad = layer.grad_norm.has_value() ? Compact(*layer.grad_norm) : "-";
      if (flagged_cells.contains(absl::StrCat(key, "grad_norm"))) {
        grad = Paint(absl::StrCat(grad, GlyphString(style, "⚠", "!")), Color::kYellow, style);
      }
      cells.push_back(absl::StrCat(lat, " / ", grad));
    }
    table.rows.push_back(std::move(cells));
  }
  if (rows.empty()) {
    absl::StrAppend(
        &out, Paint("Layers", Color::kBold, style), "\n",
        options.filter.empty() ? "(no layers)\n" : absl::StrCat(kNoLayersMatched, "\n"));
  } else {
    absl::StrAppend(&out, RenderTable(table, style));
  }
  return TruncateLines(out, options.width, style);
}

}  // namespace tracetorch::view
