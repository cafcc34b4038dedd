#include "report/html_report.h"

#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "draw/op_graph_dot.h"
#include "report/html_text.h"
#include "trace/atomic_file.h"
#include "trace/json_writer.h"
#include "trace/op_graph.h"

namespace tracetorch::report {
namespace {

// "key": value, one member of the object being written.
void Field(JsonWriter& w, std::string_view key, std::string_view value) {
  w.PlainKey(key);
  w.String(value);
}
void Field(JsonWriter& w, std::string_view key, const char* value) {
  Field(w, key, std::string_view(value));
}
void Field(JsonWriter& w, std::string_view key, int64_t value) {
  w.PlainKey(key);
  w.Int(value);
}
void Field(JsonWriter& w, std::string_view key, int value) { Field(w, key, int64_t{value}); }
void Field(JsonWriter& w, std::string_view key, double value) {
  w.PlainKey(key);
  w.Double(value);
}
void Field(JsonWriter& w, std::string_view key, const std::optional<double>& value) {
  w.PlainKey(key);
  w.OptDouble(value);
}
void Field(JsonWriter& w, std::string_view key, bool value) {
  w.PlainKey(key);
  w.Bool(value);
}

std::optional<double> FirstOutputStat(const LayerTrace& l, bool mean) {
  if (l.outputs.empty() || !l.outputs.front().stats.has_value()) return std::nullopt;
  return mean ? l.outputs.front().stats->mean : l.outputs.front().stats->std;
}

std::optional<double> AsOptional(std::optional<int64_t> v) {
  if (!v.has_value()) return std::nullopt;
  return static_cast<double>(*v);
}

int64_t OutputNan(const LayerTrace& l) {
  int64_t n = 0;
  for (const TensorInfo& t : l.outputs) n += NanCount(t);
  return n;
}

int64_t OutputInf(const LayerTrace& l) {
  int64_t n = 0;
  for (const TensorInfo& t : l.outputs) n += InfCount(t);
  return n;
}

// A column of the layer table: one JSON array over the layers.
template <typename Fn>
void Column(JsonWriter& w, std::string_view key, const std::vector<const LayerTrace*>& layers,
            Fn value) {
  w.PlainKey(key);
  w.BeginArray();
  for (const LayerTrace* l : layers) value(w, l);
  w.EndArray();
}

void WriteLayerColumns(JsonWriter& w, const std::vector<LayerTrace>& layers) {
  std::vector<const LayerTrace*> all;
  all.reserve(layers.size());
  for (const LayerTrace& l : layers) all.push_back(&l);
  w.BeginObject();
  Column(w, "name", all, [](JsonWriter& j, const LayerTrace* l) { j.String(l->full_name); });
  Column(w, "type", all, [](JsonWriter& j, const LayerTrace* l) { j.String(l->type); });
  Column(w, "params", all, [](JsonWriter& j, const LayerTrace* l) { j.Int(l->params); });
  Column(w, "lat", all,
         [](JsonWriter& j, const LayerTrace* l) { j.OptDouble(l->latency_ms_mean); });
  Column(w, "bwd", all,
         [](JsonWriter& j, const LayerTrace* l) { j.OptDouble(l->bwd_latency_ms_mean); });
  Column(w, "mem", all, [](JsonWriter& j, const LayerTrace* l) {
    j.OptDouble(AsOptional(l->fwd_mem_alloc_delta));
  });
  Column(w, "grad", all, [](JsonWriter& j, const LayerTrace* l) { j.OptDouble(l->grad_norm); });
  Column(w, "std", all,
         [](JsonWriter& j, const LayerTrace* l) { j.OptDouble(FirstOutputStat(*l, false)); });
  Column(w, "nan", all, [](JsonWriter& j, const LayerTrace* l) { j.Int(OutputNan(*l)); });
  Column(w, "inf", all, [](JsonWriter& j, const LayerTrace* l) { j.Int(OutputInf(*l)); });
  Column(w, "flags", all, [](JsonWriter& j, const LayerTrace* l) {
    j.Int((l->has_nan ? 1 : 0) | (l->has_inf ? 2 : 0) | (l->grad_has_nan ? 4 : 0) |
          (l->has_zero_grad ? 8 : 0));
  });
  w.EndObject();
}

void WriteHistory(JsonWriter& w, const StepHistory* history) {
  if (history == nullptr || history->empty()) {
    w.Null();
    return;
  }
  w.BeginObject();
  for (const LayerSteps& l : history->layers) {
    w.Key(l.full_name);
    w.BeginObject();
    w.PlainKey("steps");
    w.BeginArray();
    for (uint64_t s : l.steps) w.UInt(s);
    w.EndArray();
    for (const auto& [key, values] :
         {std::pair<std::string_view, const std::vector<double>*>{"latency_ms", &l.latency_ms},
          {"output_std", &l.output_std},
          {"grad_norm", &l.grad_norm}}) {
      w.PlainKey(key);
      w.BeginArray();
      for (size_t i = 0; i < l.steps.size(); ++i) {
        w.Double(i < values->size() ? (*values)[i] : std::nan(""));  // NaN is written null.
      }
      w.EndArray();
    }
    w.PlainKey("non_finite");
    w.BeginArray();
    for (size_t i = 0; i < l.steps.size(); ++i) {
      w.Int(i < l.non_finite.size() && l.non_finite[i] ? 1 : 0);
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndObject();
}

void WriteAnomalies(JsonWriter& w, const std::vector<Anomaly>& anomalies) {
  w.BeginArray();
  for (const Anomaly& a : anomalies) {
    w.BeginObject();
    Field(w, "severity", ToString(a.severity));
    Field(w, "type", TypeName(a));
    Field(w, "layer", a.layer);
    Field(w, "message", a.message);
    w.EndObject();
  }
  w.EndArray();
}

void WriteNanOrigin(JsonWriter& w, const std::optional<NanOrigin>& origin) {
  if (!origin.has_value()) {
    w.Null();
    return;
  }
  w.BeginObject();
  Field(w, "layer", origin->layer);
  Field(w, "step", origin->step);
  Field(w, "kind", origin->is_nan ? "nan" : "inf");
  Field(w, "op", origin->op);
  Field(w, "op_func", origin->op_func);
  Field(w, "op_module", origin->op_module);
  w.EndObject();
}

void WriteCommon(JsonWriter& w, std::string_view kind, std::string_view title,
                 std::string_view subtitle, const ReportOptions& options) {
  Field(w, "kind", kind);
  Field(w, "title", title);
  Field(w, "subtitle", subtitle);
  Field(w, "generator", options.generator);
}

// The op graph's SVG (or why there is none) for the trace's "op_graph" member.
void WriteOpGraph(JsonWriter& w, const TraceRecord& record) {
  if (record.op_graph == nullptr) return;
  const OpGraph* graph = record.op_graph.get();
  if (graph->nan_origin.has_value() && *graph->nan_origin >= 0 &&
      static_cast<size_t>(*graph->nan_origin) < graph->ops.size()) {
    Field(w, "op_graph_origin_op", graph->ops[static_cast<size_t>(*graph->nan_origin)].label);
  }
  if (graph->step.has_value()) {
    Field(w, "op_graph_step", *graph->step);
  }
  draw::DrawOptions options;
  options.format = draw::DrawFormat::kSvg;
  absl::StatusOr<std::string> svg = draw::DrawOpGraph(*graph, options);
  if (!svg.ok()) {
    Field(w, "op_graph_error", std::string(svg.status().message()));
    return;
  }
  Field(w, "op_graph_svg", *svg);
}

std::string ModelName(const TraceRecord* record) {
  if (record == nullptr || record->metadata.model_name.empty()) return "model";
  return record->metadata.model_name;
}

}  // namespace

std::string RenderTraceReport(const TraceReportInput& input, const ReportOptions& options) {
  const TraceRecord& r = *input.record;
  std::string data;
  JsonWriter w(0, &data);
  w.Reserve(256 + r.layers.size() * 160);
  w.BeginObject();
  WriteCommon(w, "trace", absl::StrCat("tracetorch report: ", ModelName(&r)), input.source,
              options);
  w.PlainKey("trace");
  w.BeginObject();
  Field(w, "source", input.source);
  w.PlainKey("meta");
  w.BeginObject();
  Field(w, "model", r.metadata.model_name);
  Field(w, "pytorch", r.metadata.pytorch_version);
  Field(w, "python", r.metadata.python_version);
  Field(w, "platform", r.metadata.platform);
  Field(w, "device", r.metadata.active_device);
  Field(w, "cuda_available", r.metadata.cuda_available);
  Field(w, "cuda", r.metadata.cuda_version);
  Field(w, "total_time_ms", r.metadata.total_time_ms);
  w.EndObject();
  w.PlainKey("nan_origin");
  WriteNanOrigin(w, r.metadata.nan_origin);
  w.PlainKey("layers");
  WriteLayerColumns(w, r.layers);
  w.PlainKey("anomalies");
  WriteAnomalies(w, r.warnings);
  w.PlainKey("history");
  WriteHistory(w, input.history);
  WriteOpGraph(w, r);
  w.EndObject();
  w.EndObject();
  w.Finish();
  return HtmlPage(absl::StrCat("tracetorch report: ", ModelName(&r)), data);
}

std::string RenderDiffReport(const DiffReportInput& input, const ReportOptions& options) {
  const TraceDiff& d = *input.diff;
  // Every layer of either side, baseline order first, then the current's new ones.
  struct Row {
    const LayerTrace* base = nullptr;
    const LayerTrace* cur = nullptr;
  };
  std::vector<Row> rows;
  absl::flat_hash_map<std::string_view, size_t> index;
  if (input.baseline.record != nullptr) {
    for (const LayerTrace& l : input.baseline.record->layers) {
      if (index.emplace(l.full_name, rows.size()).second) rows.push_back(Row{&l, nullptr});
    }
  }
  if (input.current.record != nullptr) {
    for (const LayerTrace& l : input.current.record->layers) {
      auto [it, added] = index.emplace(l.full_name, rows.size());
      if (added) {
        rows.push_back(Row{nullptr, &l});
      } else if (rows[it->second].cur == nullptr) {
        rows[it->second].cur = &l;
      }
    }
  }
  int info = 0;
  for (const DiffEntry& e : d.entries) info += e.severity == DiffSeverity::kInfo ? 1 : 0;

  std::string data;
  JsonWriter w(0, &data);
  w.Reserve(1024 + rows.size() * 200);
  w.BeginObject();
  const std::string title = absl::StrCat("tracetorch diff: ", ModelName(input.baseline.record),
                                         " vs ", ModelName(input.current.record));
  WriteCommon(w, "diff", title,
              absl::StrCat(input.baseline.description, " → ", input.current.description), options);
  w.PlainKey("diff");
  w.BeginObject();
  Field(w, "exit_status", input.exit_status);
  Field(w, "critical", d.critical_count());
  Field(w, "warning", d.warning_count());
  Field(w, "info", info);
  w.PlainKey("thresholds");
  w.BeginObject();
  Field(w, "latency", input.thresholds.latency);
  Field(w, "grad_norm", input.thresholds.grad_norm);
  Field(w, "std", input.thresholds.std);
  w.EndObject();
  for (const auto& [key, side, model] :
       {std::tuple<std::string_view, const DiffSide*, const std::string*>{
            "baseline", &input.baseline, &d.baseline_model},
        {"current", &input.current, &d.current_model}}) {
    w.PlainKey(key);
    w.BeginObject();
    Field(w, "description", side->description);
    Field(w, "model", *model);
    w.EndObject();
  }
  w.PlainKey("entries");
  w.BeginArray();
  for (const DiffEntry& e : d.entries) {
    w.BeginObject();
    Field(w, "severity", ToString(e.severity));
    Field(w, "kind", ToString(e.kind));
    Field(w, "layer", e.layer);
    Field(w, "message", e.message);
    w.EndObject();
  }
  w.EndArray();
  w.PlainKey("layers");
  w.BeginObject();
  auto column = [&](std::string_view key, auto value) {
    w.PlainKey(key);
    w.BeginArray();
    for (const Row& row : rows) value(row);
    w.EndArray();
  };
  column("name", [&](const Row& r) { w.String(r.base ? r.base->full_name : r.cur->full_name); });
  column("type", [&](const Row& r) { w.String(r.base ? r.base->type : r.cur->type); });
  column("status", [&](const Row& r) {
    w.String(r.base && r.cur ? "both" : r.base ? "removed" : "added");
  });
  for (const bool base : {true, false}) {
    auto side = [base](const Row& r) { return base ? r.base : r.cur; };
    const std::string p = base ? "b_" : "c_";
    column(p + "lat",
           [&](const Row& r) { w.OptDouble(side(r) ? side(r)->latency_ms_mean : std::nullopt); });
    column(p + "std", [&](const Row& r) {
      w.OptDouble(side(r) ? FirstOutputStat(*side(r), false) : std::nullopt);
    });
    column(p + "grad",
           [&](const Row& r) { w.OptDouble(side(r) ? side(r)->grad_norm : std::nullopt); });
  }
  w.EndObject();
  w.PlainKey("history_baseline");
  WriteHistory(w, input.baseline.history);
  w.PlainKey("history_current");
  WriteHistory(w, input.current.history);
  w.EndObject();
  w.EndObject();
  w.Finish();
  return HtmlPage(title, data);
}

absl::Status WriteReportFile(const std::string& path, const std::string& html) {
  return WriteFileAtomic(path, html);
}

}  // namespace tracetorch::report
