// Comparison of two traces for CI: what got slower, what changed shape, which anomalies appeared.
//
// Layers are matched by full_name. Entries, in a deterministic order: for each baseline layer in
// baseline order, `layer_removed` or its per-metric changes (shape_change, latency, grad norm,
// activation std); then `layer_added` for current layers in current order; then `new_anomaly` in
// the current record's warning order; then `resolved_anomaly` in the baseline's warning order.
//   layer_added / layer_removed     warning
//   shape_change                    critical   output shapes differ
//   latency_regression              warning    (c-b)/b >  latency threshold, on latency_ms_mean
//   latency_improvement             info       (c-b)/b < -latency threshold
//   grad_norm_change                warning when it grew, info when it shrank, beyond grad_norm
//   activation_std_change           warning when it grew, info when it shrank, beyond std
//                                   (std of the first output)
//   new_anomaly                     critical if the anomaly is critical, else warning
//   resolved_anomaly                info
// Anomalies are matched by (layer, type), so a finding whose numbers moved is neither new nor
// resolved. Messages read like "Latency regression: 0.035ms -> 0.046ms (+34.4%)".
//
// Noise-aware latency. The rule above compares two means, so one slow step (warm-up, a GC pause,
// a data-loader stall) or plain step-to-step jitter can flag a regression that is not there. When
// the caller has per-step forward latency samples for a layer on BOTH sides (LatencySamples, e.g.
// the daemon's per-step history; at least kMinLatencySamples finite, non-negative values each),
// that layer's latency is compared on the samples instead:
//   B, C   the baseline's and the current samples; m = median; q1, q3 = 25th and 75th percentiles
//          (linear interpolation between order statistics)
//   rel    (m_C - m_B) / m_B
//   latency_regression   rel >  latency threshold  AND  q1_C > q3_B
//   latency_improvement  rel < -latency threshold  AND  q3_C < q1_B
//   otherwise            no entry: the change is within step-to-step noise
// That is: the medians moved by more than the threshold AND the middle halves of the two sets of
// steps do not overlap (most current steps are slower than most baseline steps). For symmetric
// noise this asks for a shift of more than the mean of the two interquartile ranges (about 1.35
// standard deviations for normal noise); medians and quartiles are not moved by a few outlier
// steps, and the rule needs no distribution assumption. Within noise there is deliberately no
// entry: the diff has no kind for "unchanged", and an info entry of kind latency_regression would
// be counted as a regression by scripts that filter on `kind`.
// Entries made by this rule say so: the message ends "(+34.4%; medians of 50 vs 48 steps, beyond
// step noise)" and the details are
//   baseline_ms, current_ms       the medians (ms)        relative          rel
//   baseline_count, current_count forward calls (as in the mean rule, regressions and improvements)
//   rule                          "median+iqr"
//   baseline_samples, current_samples  samples used
//   baseline_q1_ms, baseline_q3_ms, current_q1_ms, current_q3_ms  the interquartile bands
// A layer with samples on one side only, or too few, keeps the mean rule.
//
// DiffEntry's == and != compare member by member (defaulted in diff.cc: the header stays C++17).
//
// Thread-compatible; no shared state.
#ifndef TRACETORCH_TRACE_DIFF_H_
#define TRACETORCH_TRACE_DIFF_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "trace/record.h"

namespace tracetorch {

enum class DiffSeverity { kInfo, kWarning, kCritical };
enum class DiffKind {
  kLayerAdded,
  kLayerRemoved,
  kShapeChange,
  kLatencyRegression,
  kLatencyImprovement,
  kGradNormChange,
  kActivationStdChange,
  kNewAnomaly,
  kResolvedAnomaly,
};

std::string_view ToString(DiffSeverity severity);  // "info", "warning", "critical"
std::string_view ToString(DiffKind kind);          // "layer_added", "latency_regression", ...

struct DiffEntry {
  DiffSeverity severity = DiffSeverity::kInfo;
  DiffKind kind = DiffKind::kLayerAdded;
  std::string layer;
  std::string message;
  Details details;

  friend bool operator==(const DiffEntry&, const DiffEntry&);
  friend bool operator!=(const DiffEntry& a, const DiffEntry& b) { return !(a == b); }
};

struct DiffThresholds {
  double latency = 0.10;    // Relative change of the mean latency.
  double grad_norm = 0.25;  // Relative change of grad_norm.
  double std = 0.25;        // Relative change of the first output's std.

  // InvalidArgument when a value is negative or not finite.
  absl::Status Validate() const;
};

struct TraceDiff {
  std::string baseline_model;
  std::string current_model;
  std::vector<DiffEntry> entries;

  int critical_count() const;
  int warning_count() const;
  // True when any entry is a warning or critical: `tracetorch diff` exits 1.
  bool has_regressions() const;
};

// Per-step forward latency samples (ms) of one side of a diff, by layer full_name, in any order.
// Non-finite and negative values are ignored.
//
// Example:
//   LatencySamples base;
//   base.by_layer["block.fc"] = {0.51, 0.49, 0.50, 0.52, 0.50};
struct LatencySamples {
  absl::flat_hash_map<std::string, std::vector<double>> by_layer;
};

// Fewest usable samples per side for the noise-aware rule.
inline constexpr size_t kMinLatencySamples = 5;

// The thresholds must be valid (DiffThresholds::Validate).
TraceDiff DiffRecords(const TraceRecord& baseline, const TraceRecord& current,
                      const DiffThresholds& thresholds = {});

// As above, with the noise-aware latency rule (see the top of this file) for every layer that has
// enough samples on both sides. Empty samples give exactly DiffRecords(baseline, current, ...).
TraceDiff DiffRecords(const TraceRecord& baseline, const LatencySamples& baseline_samples,
                      const TraceRecord& current, const LatencySamples& current_samples,
                      const DiffThresholds& thresholds = {});

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_DIFF_H_
