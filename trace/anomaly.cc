#include "trace/anomaly.h"

#include <cmath>
#include <cstddef>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "trace/nonfinite.h"

namespace tracetorch {
namespace {

// A number in a validation message: "%g" is short and exact enough to recognise the input.
std::string Num(double v) { return absl::StrFormat("%g", v); }

// The output index suffix for layers with several outputs: the first output reads like the
// tracetorch-ml messages, later ones say which output they are about.
std::string OutputSuffix(size_t index) {
  return index == 0 ? std::string() : absl::StrCat(" (output ", index, ")");
}

void AddOutputIndex(size_t index, Details* details) {
  if (index > 0) details->emplace_back("output", static_cast<int64_t>(index));
}

std::optional<double> FirstStd(const std::vector<TensorInfo>& tensors) {
  if (tensors.empty() || !tensors.front().stats.has_value()) return std::nullopt;
  return tensors.front().stats->std;
}

int64_t SumOutputs(const LayerTrace& layer, int64_t (*count)(const TensorInfo&)) {
  int64_t total = 0;
  for (const TensorInfo& t : layer.outputs) total += count(t);
  return total;
}

// "NaN detected in output (3 values)"; without the count when the latest call's outputs were
// finite (the flag is sticky and may come from an earlier call).
Anomaly NonFiniteActivation(const LayerTrace& layer, AnomalyType type) {
  const bool nan = type == AnomalyType::kNanActivation;
  const int64_t count = SumOutputs(layer, nan ? &NanCount : &InfCount);
  Anomaly a;
  a.type = type;
  a.severity = AnomalySeverity::kCritical;
  a.layer = layer.full_name;
  a.message = absl::StrCat(nan ? "NaN" : "Inf", " detected in output");
  if (count > 0) {
    absl::StrAppend(&a.message, " (", count, count == 1 ? " value)" : " values)");
  }
  a.details.emplace_back(nan ? "nan_count" : "inf_count", count);
  return a;
}

// The one finding that replaces every per-layer NaN/Inf activation finding when the origin of the
// first non-finite value is known.
Anomaly OriginAnomaly(const TraceRecord& record, const NanOrigin& origin) {
  std::vector<std::string> downstream;
  for (const LayerTrace& layer : record.layers) {
    if (layer.full_name == origin.layer) continue;
    if (ActivationTrouble(layer) || (origin.backward && layer.grad_has_nan)) {
      downstream.push_back(layer.full_name);
    }
  }
  const char* kind = origin.is_nan ? "NaN" : "Inf";
  Anomaly a;
  a.type = origin.backward ? AnomalyType::kNanGradient
           : origin.is_nan ? AnomalyType::kNanActivation
                           : AnomalyType::kInfActivation;
  a.severity = AnomalySeverity::kCritical;
  a.layer = origin.layer;
  if (origin.backward && origin.layer == NanOrigin::kLoss) {
    a.message = absl::StrCat(kind, " first appeared in the gradient of the loss at step ",
                             origin.step, " (before any layer's backward)");
  } else if (origin.backward) {
    a.message = absl::StrCat(kind, " first appeared in the backward of ", origin.layer, " at step ",
                             origin.step, " (its output gradient was finite)");
  } else if (origin.layer == NanOrigin::kModelInput) {
    a.message = absl::StrCat(kind, " first appeared in the model input at step ", origin.step);
  } else if (origin.layer == NanOrigin::kModelCode) {
    a.message = absl::StrCat(kind, " first appeared in the model's own code (outside its layers) ",
                             "at step ", origin.step);
  } else {
    a.message = absl::StrCat(kind, " first appeared in ", origin.layer, " at step ", origin.step,
                             " (inputs were finite)");
  }
  if (downstream.empty()) {
    absl::StrAppend(&a.message, "; no downstream layers affected");
  } else {
    absl::StrAppend(
        &a.message, "; ", downstream.size(),
        downstream.size() == 1 ? " downstream layer affected" : " downstream layers affected");
  }
  a.details.emplace_back("origin", origin.layer);
  a.details.emplace_back("step", origin.step);
  if (origin.backward) a.details.emplace_back("pass", std::string("backward"));
  if (!origin.op.empty()) {
    a.details.emplace_back("op", origin.op);
    a.details.emplace_back("op_module", origin.op_module);
  }
  a.details.emplace_back("downstream", std::move(downstream));
  return a;
}

// Magnitudes that can be huge print in scientific notation, small ones like the library's "%.2f".
std::string FormatStd(double std) {
  return std::fabs(std) < 1e6 ? absl::StrFormat("%.2f", std) : absl::StrFormat("%.3g", std);
}

void CheckOutputs(const LayerTrace& layer, const Thresholds& th, std::vector<Anomaly>* out) {
  for (size_t i = 0; i < layer.outputs.size(); ++i) {
    const std::optional<TensorStats>& stats = layer.outputs[i].stats;
    if (!stats.has_value() || !stats->std.has_value()) continue;
    const double std = *stats->std;
    if (stats->mean.has_value() && std::fabs(*stats->mean) < th.dead_layer_mean &&
        std < th.dead_layer_std) {
      Anomaly a;
      a.type = AnomalyType::kDeadLayer;
      a.severity = AnomalySeverity::kWarning;
      a.layer = layer.full_name;
      a.message = absl::StrFormat("Dead layer: output mean=%.3g std=%.3g", *stats->mean, std) +
                  OutputSuffix(i);
      a.details.emplace_back("mean", *stats->mean);
      a.details.emplace_back("std", std);
      AddOutputIndex(i, &a.details);
      out->push_back(std::move(a));
    }
    if (std > th.exploding_variance_std) {
      Anomaly a;
      a.type = AnomalyType::kExplodingVariance;
      a.severity = AnomalySeverity::kWarning;
      a.layer = layer.full_name;
      a.message = absl::StrCat("Exploding variance: std=", FormatStd(std), OutputSuffix(i));
      a.details.emplace_back("std", std);
      AddOutputIndex(i, &a.details);
      out->push_back(std::move(a));
    } else if (std > th.high_variance_min) {
      Anomaly a;
      a.type = AnomalyType::kHighVariance;
      a.severity = AnomalySeverity::kInfo;
      a.layer = layer.full_name;
      a.message = absl::StrCat("High activation variance: std=", FormatStd(std), OutputSuffix(i));
      a.details.emplace_back("std", std);
      AddOutputIndex(i, &a.details);
      out->push_back(std::move(a));
    }
  }
}

void CheckVarianceSpike(const LayerTrace& layer, const Thresholds& th, std::vector<Anomaly>* out) {
  const std::optional<double> in_std = FirstStd(layer.inputs);
  const std::optional<double> out_std = FirstStd(layer.outputs);
  if (!in_std.has_value() || !out_std.has_value() || !(*in_std > 0)) return;
  const double ratio = *out_std / *in_std;
  if (!(ratio > th.variance_spike_ratio)) return;
  Anomaly a;
  a.type = AnomalyType::kExplodingVariance;
  a.severity = AnomalySeverity::kWarning;
  a.layer = layer.full_name;
  a.message = absl::StrFormat("Variance spike: std increased from %.2f to %.2f (x%.1f)", *in_std,
                              *out_std, ratio);
  a.details.emplace_back("input_std", *in_std);
  a.details.emplace_back("output_std", *out_std);
  a.details.emplace_back("ratio", ratio);
  out->push_back(std::move(a));
}

Anomaly Simple(const LayerTrace& layer, AnomalyType type, AnomalySeverity severity,
               std::string message) {
  Anomaly a;
  a.type = type;
  a.severity = severity;
  a.layer = layer.full_name;
  a.message = std::move(message);
  return a;
}

}  // namespace

absl::Status Thresholds::Validate() const {
  std::vector<std::string> problems;
  const std::pair<const char*, double> fields[] = {
      {"dead_layer_mean", dead_layer_mean},
      {"dead_layer_std", dead_layer_std},
      {"exploding_variance_std", exploding_variance_std},
      {"high_variance_min", high_variance_min},
      {"variance_spike_ratio", variance_spike_ratio},
  };
  bool all_finite = true;
  for (const auto& [name, value] : fields) {
    if (!std::isfinite(value)) {
      problems.push_back(absl::StrCat(name, " must be finite (got ", Num(value), ")"));
      all_finite = false;
    } else if (value < 0) {
      problems.push_back(absl::StrCat(name, " must not be negative (got ", Num(value), ")"));
    }
  }
  if (all_finite) {
    if (high_variance_min >= exploding_variance_std) {
      problems.push_back(absl::StrCat("high_variance_min (", Num(high_variance_min),
                                      ") must be less than exploding_variance_std (",
                                      Num(exploding_variance_std), ")"));
    }
    if (variance_spike_ratio <= 1) {
      problems.push_back(absl::StrCat("variance_spike_ratio (", Num(variance_spike_ratio),
                                      ") must be greater than 1"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("invalid anomaly thresholds: ", absl::StrJoin(problems, "; ")));
}

absl::StatusOr<std::vector<Anomaly>> DetectAnomalies(const TraceRecord& record,
                                                     const Thresholds& thresholds) {
  if (absl::Status s = thresholds.Validate(); !s.ok()) return s;
  const std::optional<NanOrigin>& origin = record.metadata.nan_origin;

  std::vector<Anomaly> found;
  // The origin finding goes where the origin layer is in record order; first when the origin is
  // the model input or a layer the record does not hold.
  bool origin_reported = false;
  if (origin.has_value() && record.FindLayer(origin->layer) == nullptr) {
    found.push_back(OriginAnomaly(record, *origin));
    origin_reported = true;
  }

  for (const LayerTrace& layer : record.layers) {
    if (origin.has_value()) {
      if (!origin_reported && layer.full_name == origin->layer) {
        found.push_back(OriginAnomaly(record, *origin));
        origin_reported = true;
      }
    } else {
      if (layer.has_nan) found.push_back(NonFiniteActivation(layer, AnomalyType::kNanActivation));
      // An Inf counts only outside masks (trace/nonfinite.h); files that do not say (tracetorch-ml)
      // count every Inf.
      if (layer.has_inf && !layer.inf_in_masks_only) {
        found.push_back(NonFiniteActivation(layer, AnomalyType::kInfActivation));
      }
    }
    CheckOutputs(layer, thresholds, &found);
    CheckVarianceSpike(layer, thresholds, &found);
    // A layer seen only in backward (its forward was missed) has no outputs to speak of.
    const bool forward_missed = layer.forward_count == 0 && layer.backward_count > 0;
    if (layer.outputs.empty() && !forward_missed) {
      found.push_back(Simple(layer, AnomalyType::kEmptyOutput, AnomalySeverity::kWarning,
                             "Empty output: layer produced no tensor"));
    }
    if (layer.has_zero_grad) {
      found.push_back(Simple(layer, AnomalyType::kZeroGradient, AnomalySeverity::kWarning,
                             "Zero gradient: output gradient is all zeros"));
    }
    if (layer.grad_has_nan) {
      found.push_back(Simple(layer, AnomalyType::kNanGradient, AnomalySeverity::kCritical,
                             "NaN in gradient: output gradient held NaN"));
    }
  }
  return found;
}

}  // namespace tracetorch
