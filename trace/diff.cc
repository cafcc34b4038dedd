#include "trace/diff.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "trace/format.h"

namespace tracetorch {
namespace {

// (c - b) / b, or nullopt when either side is unknown or not finite, or b == 0.
std::optional<double> RelativeChange(std::optional<double> b, std::optional<double> c) {
  if (!b.has_value() || !c.has_value()) return std::nullopt;
  if (!std::isfinite(*b) || !std::isfinite(*c) || *b == 0) return std::nullopt;
  return (*c - *b) / *b;
}

std::optional<double> FirstOutputStd(const LayerTrace& layer) {
  if (layer.outputs.empty() || !layer.outputs.front().stats.has_value()) return std::nullopt;
  return layer.outputs.front().stats->std;
}

// "[16, 64]"; several outputs are listed in order, no output reads "none".
std::string OutputShapes(const LayerTrace& layer) {
  if (layer.outputs.empty()) return "none";
  return absl::StrJoin(layer.outputs, ", ", [](std::string* out, const TensorInfo& t) {
    out->append(FormatShape(t.shape));
  });
}

bool SameOutputShapes(const LayerTrace& a, const LayerTrace& b) {
  if (a.outputs.size() != b.outputs.size()) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    if (a.outputs[i].shape != b.outputs[i].shape) return false;
  }
  return true;
}

DiffEntry Entry(DiffSeverity severity, DiffKind kind, std::string layer, std::string message) {
  DiffEntry e;
  e.severity = severity;
  e.kind = kind;
  e.layer = std::move(layer);
  e.message = std::move(message);
  return e;
}

// Latency in the diff messages: three decimals, as tracetorch-ml prints them ("1.448ms").
std::string DiffMs(double ms) { return absl::StrFormat("%.3fms", ms); }

// A layer's usable samples (finite, non-negative), sorted; empty when there are too few.
std::vector<double> UsableSamples(const LatencySamples* samples, const std::string& layer) {
  if (samples == nullptr) return {};
  auto it = samples->by_layer.find(layer);
  if (it == samples->by_layer.end()) return {};
  std::vector<double> out;
  out.reserve(it->second.size());
  for (double v : it->second) {
    if (std::isfinite(v) && v >= 0) out.push_back(v);
  }
  if (out.size() < kMinLatencySamples) return {};
  std::sort(out.begin(), out.end());
  return out;
}

// The p-quantile of sorted, non-empty `x`, interpolating linearly between order statistics.
double Quantile(const std::vector<double>& x, double p) {
  const double h = static_cast<double>(x.size() - 1) * p;
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, x.size() - 1);
  return x[lo] + (h - static_cast<double>(lo)) * (x[hi] - x[lo]);
}

struct Band {
  double q1 = 0;
  double median = 0;
  double q3 = 0;
};

Band BandOf(const std::vector<double>& sorted) {
  return Band{Quantile(sorted, 0.25), Quantile(sorted, 0.5), Quantile(sorted, 0.75)};
}

// The noise-aware rule (diff.h) on sorted samples with at least kMinLatencySamples each.
void CompareLatencySamples(const LayerTrace& b, const LayerTrace& c, double threshold,
                           const std::vector<double>& bs, const std::vector<double>& cs,
                           std::vector<DiffEntry>* out) {
  const Band bb = BandOf(bs);
  const Band cb = BandOf(cs);
  if (bb.median == 0) return;  // As the mean rule: no relative change from zero.
  const double rel = (cb.median - bb.median) / bb.median;
  DiffSeverity severity;
  DiffKind kind;
  const char* what;
  if (rel > threshold && cb.q1 > bb.q3) {
    severity = DiffSeverity::kWarning;
    kind = DiffKind::kLatencyRegression;
    what = "Latency regression: ";
  } else if (rel < -threshold && cb.q3 < bb.q1) {
    severity = DiffSeverity::kInfo;
    kind = DiffKind::kLatencyImprovement;
    what = "Latency improved: ";
  } else {
    return;  // Within the threshold, or within step-to-step noise.
  }
  DiffEntry e = Entry(
      severity, kind, b.full_name,
      absl::StrCat(what, DiffMs(bb.median), " -> ", DiffMs(cb.median), " (", FormatPercent(rel),
                   "; medians of ", bs.size(), " vs ", cs.size(), " steps, beyond step noise)"));
  e.details.emplace_back("baseline_ms", bb.median);
  e.details.emplace_back("current_ms", cb.median);
  e.details.emplace_back("relative", rel);
  e.details.emplace_back("baseline_count", b.forward_count);
  e.details.emplace_back("current_count", c.forward_count);
  e.details.emplace_back("rule", std::string("median+iqr"));
  e.details.emplace_back("baseline_samples", static_cast<int64_t>(bs.size()));
  e.details.emplace_back("current_samples", static_cast<int64_t>(cs.size()));
  e.details.emplace_back("baseline_q1_ms", bb.q1);
  e.details.emplace_back("baseline_q3_ms", bb.q3);
  e.details.emplace_back("current_q1_ms", cb.q1);
  e.details.emplace_back("current_q3_ms", cb.q3);
  out->push_back(std::move(e));
}

// The mean rule (diff.h), as tracetorch-ml has it.
void CompareLatencyMeans(const LayerTrace& b, const LayerTrace& c, double threshold,
                         std::vector<DiffEntry>* out) {
  std::optional<double> rel = RelativeChange(b.latency_ms_mean, c.latency_ms_mean);
  if (!rel.has_value()) return;
  const double bm = *b.latency_ms_mean;
  const double cm = *c.latency_ms_mean;
  if (*rel > threshold) {
    DiffEntry e = Entry(DiffSeverity::kWarning, DiffKind::kLatencyRegression, b.full_name,
                        absl::StrCat("Latency regression: ", DiffMs(bm), " -> ", DiffMs(cm), " (",
                                     FormatPercent(*rel), ")"));
    e.details.emplace_back("baseline_ms", bm);
    e.details.emplace_back("current_ms", cm);
    e.details.emplace_back("relative", *rel);
    e.details.emplace_back("baseline_count", b.forward_count);
    e.details.emplace_back("current_count", c.forward_count);
    out->push_back(std::move(e));
  } else if (*rel < -threshold) {
    // tracetorch-ml gives improvements no call counts; we keep its details layout.
    DiffEntry e = Entry(DiffSeverity::kInfo, DiffKind::kLatencyImprovement, b.full_name,
                        absl::StrCat("Latency improved: ", DiffMs(bm), " -> ", DiffMs(cm), " (",
                                     FormatPercent(*rel), ")"));
    e.details.emplace_back("baseline_ms", bm);
    e.details.emplace_back("current_ms", cm);
    e.details.emplace_back("relative", *rel);
    out->push_back(std::move(e));
  }
}

void CompareLayer(const LayerTrace& b, const LayerTrace& c, const DiffThresholds& th,
                  const LatencySamples* base_samples, const LatencySamples* cur_samples,
                  std::vector<DiffEntry>* out) {
  if (!SameOutputShapes(b, c)) {
    const std::string before = OutputShapes(b);
    const std::string after = OutputShapes(c);
    DiffEntry e = Entry(DiffSeverity::kCritical, DiffKind::kShapeChange, b.full_name,
                        absl::StrCat("Output shape changed: ", before, " -> ", after));
    e.details.emplace_back("baseline", before);
    e.details.emplace_back("current", after);
    out->push_back(std::move(e));
  }

  const std::vector<double> bs = UsableSamples(base_samples, b.full_name);
  const std::vector<double> cs =
      bs.empty() ? std::vector<double>() : UsableSamples(cur_samples, c.full_name);
  if (!bs.empty() && !cs.empty()) {
    CompareLatencySamples(b, c, th.latency, bs, cs, out);
  } else {
    CompareLatencyMeans(b, c, th.latency, out);
  }

  // grad_norm and the first output's std share one rule: warning when the value grew beyond the
  // threshold, info when it shrank beyond it.
  auto compare_value = [&](std::optional<double> bv, std::optional<double> cv, double threshold,
                           DiffKind kind, const char* label) {
    std::optional<double> rel = RelativeChange(bv, cv);
    if (!rel.has_value()) return;
    DiffSeverity severity;
    if (*rel > threshold) {
      severity = DiffSeverity::kWarning;
    } else if (*rel < -threshold) {
      severity = DiffSeverity::kInfo;
    } else {
      return;
    }
    DiffEntry e = Entry(
        severity, kind, b.full_name,
        absl::StrFormat("%s changed: %.4f -> %.4f (%s)", label, *bv, *cv, FormatPercent(*rel)));
    e.details.emplace_back("baseline", *bv);
    e.details.emplace_back("current", *cv);
    e.details.emplace_back("relative", *rel);
    out->push_back(std::move(e));
  };
  compare_value(b.grad_norm, c.grad_norm, th.grad_norm, DiffKind::kGradNormChange, "Gradient norm");
  compare_value(FirstOutputStd(b), FirstOutputStd(c), th.std, DiffKind::kActivationStdChange,
                "Output std");
}

// (layer, type spelling): a type this version does not know matches the same spelling only.
using AnomalyKey = std::pair<std::string, std::string>;

AnomalyKey KeyOf(const Anomaly& a) { return AnomalyKey(a.layer, std::string(TypeName(a))); }

absl::flat_hash_set<AnomalyKey> AnomalyKeys(const std::vector<Anomaly>& anomalies) {
  absl::flat_hash_set<AnomalyKey> keys;
  for (const Anomaly& a : anomalies) keys.insert(KeyOf(a));
  return keys;
}

}  // namespace

// Declared in diff.h without a body so that the header compiles as C++17; defaulted here.
bool operator==(const DiffEntry&, const DiffEntry&) = default;

std::string_view ToString(DiffSeverity severity) {
  switch (severity) {
    case DiffSeverity::kInfo:
      return "info";
    case DiffSeverity::kWarning:
      return "warning";
    case DiffSeverity::kCritical:
      return "critical";
  }
  return "unknown";
}

std::string_view ToString(DiffKind kind) {
  switch (kind) {
    case DiffKind::kLayerAdded:
      return "layer_added";
    case DiffKind::kLayerRemoved:
      return "layer_removed";
    case DiffKind::kShapeChange:
      return "shape_change";
    case DiffKind::kLatencyRegression:
      return "latency_regression";
    case DiffKind::kLatencyImprovement:
      return "latency_improvement";
    case DiffKind::kGradNormChange:
      return "grad_norm_change";
    case DiffKind::kActivationStdChange:
      return "activation_std_change";
    case DiffKind::kNewAnomaly:
      return "new_anomaly";
    case DiffKind::kResolvedAnomaly:
      return "resolved_anomaly";
  }
  return "unknown";
}

absl::Status DiffThresholds::Validate() const {
  std::vector<std::string> problems;
  const std::pair<const char*, double> fields[] = {
      {"latency", latency}, {"grad_norm", grad_norm}, {"std", std}};
  for (const auto& [name, value] : fields) {
    if (!std::isfinite(value)) {
      problems.push_back(absl::StrFormat("%s must be finite (got %g)", name, value));
    } else if (value < 0) {
      problems.push_back(absl::StrFormat("%s must not be negative (got %g)", name, value));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("invalid diff thresholds: ", absl::StrJoin(problems, "; ")));
}

int TraceDiff::critical_count() const {
  int n = 0;
  for (const DiffEntry& e : entries) n += e.severity == DiffSeverity::kCritical ? 1 : 0;
  return n;
}

int TraceDiff::warning_count() const {
  int n = 0;
  for (const DiffEntry& e : entries) n += e.severity == DiffSeverity::kWarning ? 1 : 0;
  return n;
}

bool TraceDiff::has_regressions() const { return critical_count() > 0 || warning_count() > 0; }

TraceDiff DiffRecords(const TraceRecord& baseline, const TraceRecord& current,
                      const DiffThresholds& thresholds) {
  return DiffRecords(baseline, LatencySamples(), current, LatencySamples(), thresholds);
}

TraceDiff DiffRecords(const TraceRecord& baseline, const LatencySamples& baseline_samples,
                      const TraceRecord& current, const LatencySamples& current_samples,
                      const DiffThresholds& thresholds) {
  TraceDiff diff;
  diff.baseline_model = baseline.metadata.model_name;
  diff.current_model = current.metadata.model_name;
  std::vector<DiffEntry>& out = diff.entries;

  // full_name -> layer; the first of duplicated names wins, as FindLayer would have it.
  absl::flat_hash_map<std::string_view, const LayerTrace*> base_index;
  absl::flat_hash_map<std::string_view, const LayerTrace*> cur_index;
  for (const LayerTrace& l : baseline.layers) base_index.emplace(l.full_name, &l);
  for (const LayerTrace& l : current.layers) cur_index.emplace(l.full_name, &l);

  absl::flat_hash_set<std::string_view> done;  // Baseline names already handled.
  for (const LayerTrace& b : baseline.layers) {
    if (!done.insert(b.full_name).second) continue;
    auto it = cur_index.find(b.full_name);
    if (it == cur_index.end()) {
      DiffEntry e = Entry(DiffSeverity::kWarning, DiffKind::kLayerRemoved, b.full_name,
                          absl::StrCat("Layer removed: ", b.full_name, " (", b.type, ")"));
      e.details.emplace_back("type", b.type);
      out.push_back(std::move(e));
      continue;
    }
    CompareLayer(b, *it->second, thresholds, &baseline_samples, &current_samples, &out);
  }

  absl::flat_hash_set<std::string_view> added;
  for (const LayerTrace& c : current.layers) {
    if (base_index.contains(c.full_name) || !added.insert(c.full_name).second) continue;
    DiffEntry e = Entry(DiffSeverity::kWarning, DiffKind::kLayerAdded, c.full_name,
                        absl::StrCat("Layer added: ", c.full_name, " (", c.type, ")"));
    e.details.emplace_back("type", c.type);
    out.push_back(std::move(e));
  }

  const absl::flat_hash_set<AnomalyKey> base_keys = AnomalyKeys(baseline.warnings);
  const absl::flat_hash_set<AnomalyKey> cur_keys = AnomalyKeys(current.warnings);
  for (const Anomaly& a : current.warnings) {
    if (base_keys.contains(KeyOf(a))) continue;
    const DiffSeverity severity =
        a.severity == AnomalySeverity::kCritical ? DiffSeverity::kCritical : DiffSeverity::kWarning;
    DiffEntry e =
        Entry(severity, DiffKind::kNewAnomaly, a.layer, absl::StrCat("New anomaly: ", a.message));
    e.details.emplace_back("type", std::string(TypeName(a)));
    e.details.emplace_back("severity", std::string(ToString(a.severity)));
    out.push_back(std::move(e));
  }
  for (const Anomaly& a : baseline.warnings) {
    if (cur_keys.contains(KeyOf(a))) continue;
    DiffEntry e = Entry(DiffSeverity::kInfo, DiffKind::kResolvedAnomaly, a.layer,
                        absl::StrCat("Resolved anomaly: ", a.message));
    e.details.emplace_back("type", std::string(TypeName(a)));
    out.push_back(std::move(e));
  }
  return diff;
}

}  // namespace tracetorch
