#include "report/tensorboard/trace_events.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tracetorch::tensorboard {
namespace {

// Escapes what Markdown or HTML would read as markup, and keeps a table cell on one line.
std::string EscapeMarkdown(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '\n':
      case '\r':
        out += ' ';
        break;
      case '|':
      case '\\':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
      case '#':
        out += '\\';
        out += c;
        break;
      default:
        out += c;
    }
  }
  return out;
}

int SeverityRank(AnomalySeverity s) {
  switch (s) {
    case AnomalySeverity::kCritical:
      return 0;
    case AnomalySeverity::kWarning:
      return 1;
    case AnomalySeverity::kInfo:
      return 2;
  }
  return 3;
}

class Emitter {
 public:
  Emitter(EventFileWriter* writer, const ScalarObserver& observe)
      : writer_(writer), observe_(observe) {}

  // Writes a measured value; skips a NaN (not measured).
  absl::Status Scalar(const std::string& tag, int64_t step, double value) {
    if (std::isnan(value)) return absl::OkStatus();
    if (absl::Status s = writer_->AddScalar(tag, step, value); !s.ok()) return s;
    ++scalars_;
    if (observe_) observe_(WrittenScalar{tag, step, value});
    return absl::OkStatus();
  }
  uint64_t scalars() const { return scalars_; }

 private:
  EventFileWriter* const writer_;
  const ScalarObserver& observe_;
  uint64_t scalars_ = 0;
};

double At(const std::vector<double>& v, size_t i) { return i < v.size() ? v[i] : std::nan(""); }

std::optional<double> FirstOutputStd(const LayerTrace& layer) {
  if (layer.outputs.empty() || !layer.outputs.front().stats.has_value()) return std::nullopt;
  return layer.outputs.front().stats->std;
}

absl::Status WriteSteps(const LayerSteps& layer, size_t begin, size_t end, Emitter* emit) {
  const std::string latency = LayerTag(layer.full_name, "latency_ms");
  const std::string std_tag = LayerTag(layer.full_name, "activation_std");
  const std::string grad = LayerTag(layer.full_name, "grad_norm");
  const std::string non_finite = LayerTag(layer.full_name, "non_finite");
  for (size_t i = begin; i < std::min(end, layer.steps.size()); ++i) {
    const int64_t step = static_cast<int64_t>(layer.steps[i]);
    const bool bad = i < layer.non_finite.size() && layer.non_finite[i];
    for (absl::Status s : {emit->Scalar(latency, step, At(layer.latency_ms, i)),
                           emit->Scalar(std_tag, step, At(layer.output_std, i)),
                           emit->Scalar(grad, step, At(layer.grad_norm, i)),
                           emit->Scalar(non_finite, step, bad ? 1.0 : 0.0)}) {
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string LayerTag(std::string_view full_name, std::string_view metric) {
  std::string tag = "layers/";
  tag.append(full_name);
  tag += '/';
  tag.append(metric);
  return tag;
}

std::string AnomaliesMarkdown(const TraceRecord& record) {
  std::string out;
  if (const std::optional<NanOrigin>& o = record.metadata.nan_origin; o.has_value()) {
    absl::StrAppend(&out, "**", o->is_nan ? "NaN" : "Inf", " origin:** ", EscapeMarkdown(o->layer),
                    " at step ", o->step);
    if (!o->op.empty()) {
      absl::StrAppend(&out, ", op ", EscapeMarkdown(o->op), " (", EscapeMarkdown(o->op_func), ")");
    }
    out += "\n\n";
  }
  if (record.warnings.empty()) {
    out += "No anomalies.\n";
    return out;
  }
  std::vector<const Anomaly*> order;
  for (const Anomaly& a : record.warnings) order.push_back(&a);
  const std::string origin =
      record.metadata.nan_origin.has_value() ? record.metadata.nan_origin->layer : "";
  std::stable_sort(order.begin(), order.end(), [&origin](const Anomaly* a, const Anomaly* b) {
    const bool ao = !origin.empty() && a->layer == origin;
    const bool bo = !origin.empty() && b->layer == origin;
    if (ao != bo) return ao;
    return SeverityRank(a->severity) < SeverityRank(b->severity);
  });
  out += "| severity | type | layer | message |\n|---|---|---|---|\n";
  for (const Anomaly* a : order) {
    absl::StrAppend(&out, "| ", std::string(ToString(a->severity)), " | ",
                    EscapeMarkdown(TypeName(*a)), " | ", EscapeMarkdown(a->layer), " | ",
                    EscapeMarkdown(a->message), " |\n");
  }
  return out;
}

absl::StatusOr<uint64_t> WriteLayerSteps(const LayerSteps& layer, size_t begin, size_t end,
                                         EventFileWriter* writer, const ScalarObserver& observe) {
  Emitter emit(writer, observe);
  if (absl::Status s = WriteSteps(layer, begin, end, &emit); !s.ok()) return s;
  return emit.scalars();
}

absl::StatusOr<uint64_t> WriteFinalEvents(const TraceRecord& record, int64_t step,
                                          EventFileWriter* writer, const ScalarObserver& observe) {
  Emitter emit(writer, observe);
  for (const LayerTrace& l : record.layers) {
    int64_t nan = 0;
    int64_t inf = 0;
    for (const TensorInfo& t : l.outputs) {
      nan += NanCount(t);
      inf += InfCount(t);
    }
    if (absl::Status s =
            emit.Scalar(LayerTag(l.full_name, "nan_count"), step, static_cast<double>(nan));
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            emit.Scalar(LayerTag(l.full_name, "inf_count"), step, static_cast<double>(inf));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = writer->AddText("anomalies", step, AnomaliesMarkdown(record)); !s.ok()) {
    return s;
  }
  return emit.scalars();
}

absl::StatusOr<ExportCounts> WriteTraceEvents(const TraceRecord& record, const StepHistory& history,
                                              EventFileWriter* writer,
                                              const ScalarObserver& observe) {
  Emitter emit(writer, observe);
  ExportCounts counts;
  int64_t last = 0;
  if (!history.empty()) {
    for (const LayerSteps& l : history.layers) {
      if (!l.steps.empty()) last = std::max(last, static_cast<int64_t>(l.steps.back()));
      if (absl::Status s = WriteSteps(l, 0, l.steps.size(), &emit); !s.ok()) return s;
    }
  } else {
    for (const LayerTrace& l : record.layers) last = std::max(last, l.forward_count - 1);
    for (const LayerTrace& l : record.layers) {
      const std::optional<double> std_value = FirstOutputStd(l);
      for (absl::Status s : {emit.Scalar(LayerTag(l.full_name, "latency_ms"), last,
                                         l.latency_ms.value_or(std::nan(""))),
                             emit.Scalar(LayerTag(l.full_name, "activation_std"), last,
                                         std_value.value_or(std::nan(""))),
                             emit.Scalar(LayerTag(l.full_name, "grad_norm"), last,
                                         l.grad_norm.value_or(std::nan(""))),
                             emit.Scalar(LayerTag(l.full_name, "non_finite"), last,
                                         l.has_nan || l.has_inf || l.grad_has_nan ? 1.0 : 0.0)}) {
        if (!s.ok()) return s;
      }
    }
  }
  absl::StatusOr<uint64_t> final_scalars = WriteFinalEvents(record, last, writer, observe);
  if (!final_scalars.ok()) return final_scalars.status();
  if (absl::Status s = writer->Flush(); !s.ok()) return s;
  counts.scalars = emit.scalars() + *final_scalars;
  counts.texts = 1;
  counts.last_step = last;
  return counts;
}

}  // namespace tracetorch::tensorboard
