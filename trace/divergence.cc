#include "trace/divergence.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tracetorch {
namespace {

// Median of a non-empty list (the mean of the two middle values for an even count).
double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::optional<double> MeanLatency(const LayerTrace& layer) {
  if (layer.latency_ms_mean.has_value()) return layer.latency_ms_mean;
  return layer.latency_ms;
}

std::optional<double> GradNorm(const LayerTrace& layer) { return layer.grad_norm; }

struct Metric {
  std::string_view key;   // details["metric"]
  std::string_view name;  // In the message.
  std::string_view unit;  // Appended to values in the message.
  std::optional<double> (*value)(const LayerTrace&);
  double DivergenceThresholds::*threshold;
  bool apply_min_latency;
};

constexpr Metric kMetrics[] = {
    {"latency_ms", "forward latency", " ms", &MeanLatency, &DivergenceThresholds::latency, true},
    {"grad_norm", "gradient norm", "", &GradNorm, &DivergenceThresholds::grad_norm, false},
};

struct Sample {
  size_t rank_index;  // Into the `ranks` argument.
  double value;
};

}  // namespace

absl::Status DivergenceThresholds::Validate() const {
  std::vector<std::string> bad;
  if (!std::isfinite(latency) || latency < 0) bad.push_back("latency");
  if (!std::isfinite(grad_norm) || grad_norm < 0) bad.push_back("grad_norm");
  if (!std::isfinite(min_latency_ms) || min_latency_ms < 0) bad.push_back("min_latency_ms");
  if (bad.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("divergence thresholds must be finite and >= 0: ", absl::StrJoin(bad, ", ")));
}

// For each layer and metric, the ranks with a finite, positive value are compared (the rules are
// in the header). With three or more, a rank is flagged when its value departs from the median of
// the OTHER ranks by more than the threshold (relative to that median) AND from the median of all
// ranks by more than the threshold: with three ranks the others' median of a normal rank is pulled
// halfway to a straggler, and the second condition keeps such a rank from being flagged along with
// the straggler. With two, the other rank's value is the reference and only the larger is judged.
std::vector<Anomaly> DetectRankDivergence(const std::vector<RankTrace>& ranks,
                                          const DivergenceThresholds& thresholds) {
  std::vector<Anomaly> found;
  if (!thresholds.Validate().ok()) return found;

  // Ranks with a record, and a full_name -> layer index per rank.
  std::vector<size_t> present;
  std::vector<absl::flat_hash_map<std::string_view, const LayerTrace*>> index(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].record == nullptr) continue;
    present.push_back(r);
    for (const LayerTrace& layer : ranks[r].record->layers) {
      index[r].try_emplace(layer.full_name, &layer);
    }
  }
  if (present.size() < 2) return found;

  // Layer order: the first rank's layers, then layers only other ranks have, as they appear.
  std::vector<std::string_view> layer_order;
  absl::flat_hash_map<std::string_view, bool> seen;
  for (size_t r : present) {
    for (const LayerTrace& layer : ranks[r].record->layers) {
      if (seen.try_emplace(layer.full_name, true).second) layer_order.push_back(layer.full_name);
    }
  }

  for (std::string_view name : layer_order) {
    // Per rank (in argument order), per metric: the anomalies for this layer.
    std::vector<std::vector<Anomaly>> per_rank(ranks.size());
    for (const Metric& metric : kMetrics) {
      std::vector<Sample> samples;
      for (size_t r : present) {
        auto it = index[r].find(name);
        if (it == index[r].end()) continue;
        const std::optional<double> v = metric.value(*it->second);
        if (!v.has_value() || !std::isfinite(*v) || *v < 0) continue;
        samples.push_back({r, *v});
      }
      if (samples.size() < 2) continue;
      if (metric.apply_min_latency) {
        const bool all_fast = std::all_of(samples.begin(), samples.end(), [&](const Sample& s) {
          return s.value < thresholds.min_latency_ms;
        });
        if (all_fast) continue;
      }
      std::vector<double> all;
      for (const Sample& s : samples) all.push_back(s.value);
      const double median_all = Median(all);
      const double threshold = thresholds.*metric.threshold;
      for (size_t i = 0; i < samples.size(); ++i) {
        std::vector<double> others;
        for (size_t j = 0; j < samples.size(); ++j) {
          if (j != i) others.push_back(samples[j].value);
        }
        const double median = Median(std::move(others));
        const double value = samples[i].value;
        if (median <= 0 || median_all <= 0) continue;  // No scale to be relative to.
        if (samples.size() == 2) {
          // No majority: only the larger value is judged, against the other rank's.
          if (!(value > median && (value - median) / median > threshold)) continue;
        } else {
          const double departure = std::fabs(value - median) / median;
          const double departure_all = std::fabs(value - median_all) / median_all;
          if (!(departure > threshold && departure_all > threshold)) continue;
        }

        const RankTrace& rank = ranks[samples[i].rank_index];
        const std::string label =
            rank.label.empty() ? absl::StrCat("rank ", rank.rank) : rank.label;
        const double ratio = value / median;
        Anomaly a;
        a.type = AnomalyType::kRankDivergence;
        a.severity = AnomalySeverity::kWarning;
        a.layer = std::string(name);
        const char* reference =
            samples.size() == 2 ? "the other rank's" : "the other ranks' median";
        a.message = absl::StrFormat("%s: %s %.4g%s is %.2fx %s %.4g%s", label, metric.name, value,
                                    metric.unit, ratio, reference, median, metric.unit);
        a.details = {
            {"rank", static_cast<int64_t>(rank.rank)},
            {"label", label},
            {"metric", std::string(metric.key)},
            {"value", value},
            {"median", median},
            {"ratio", ratio},
            {"threshold", threshold},
            {"ranks_compared", static_cast<int64_t>(samples.size())},
        };
        per_rank[samples[i].rank_index].push_back(std::move(a));
      }
    }
    for (std::vector<Anomaly>& list : per_rank) {
      for (Anomaly& a : list) found.push_back(std::move(a));
    }
  }
  return found;
}

}  // namespace tracetorch
