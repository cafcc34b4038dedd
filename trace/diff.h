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
// Thread-compatible; no shared state.
#ifndef TRACETORCH_TRACE_DIFF_H_
#define TRACETORCH_TRACE_DIFF_H_

#include <string>
#include <string_view>
#include <vector>

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

  friend bool operator==(const DiffEntry&, const DiffEntry&) = default;
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

// The thresholds must be valid (DiffThresholds::Validate).
TraceDiff DiffRecords(const TraceRecord& baseline, const TraceRecord& current,
                      const DiffThresholds& thresholds = {});

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_DIFF_H_
