// Anomaly detection over a finished (or in-progress) trace.
//
// Eight checks, all comparisons strict, run per layer in record order:
//   nan_activation  (critical) an output ever held NaN            (LayerTrace::has_nan)
//   inf_activation  (critical) an output ever held +/-Inf         (LayerTrace::has_inf)
//   dead_layer      (warning)  per output: |mean| < dead_layer_mean and std < dead_layer_std
//   exploding_variance (warning) per output: std > exploding_variance_std
//   high_variance   (info)     per output: high_variance_min < std <= exploding_variance_std
//   variance spike  (warning, type exploding_variance) first output std > variance_spike_ratio x
//                   first input std; skipped when the input std <= 0 or either is unknown
//   empty_output    (warning)  the layer produced no tensor
//   zero_gradient   (warning)  an output gradient was all zeros  (has_zero_grad)
//   nan_gradient    (critical) an output gradient held NaN       (grad_has_nan)
// Messages match the tracetorch-ml library where it has one, e.g.
//   "Variance spike: std increased from 0.07 to 0.99 (x14.7)", "High activation variance:
//   std=26.53".
//
// NaN origin: when record.metadata.nan_origin is set, the NaN/Inf activation findings are reported
// as ONE critical anomaly on the origin layer (or "<input>"), naming it and the step, with the
// affected downstream layers listed in details["downstream"], instead of one critical per layer.
//
// Thread-compatible; no shared state.
#ifndef TRACETORCH_TRACE_ANOMALY_H_
#define TRACETORCH_TRACE_ANOMALY_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trace/record.h"

namespace tracetorch {

struct Thresholds {
  double dead_layer_mean = 1e-6;
  double dead_layer_std = 1e-6;
  double exploding_variance_std = 100.0;
  double high_variance_min = 10.0;
  double variance_spike_ratio = 10.0;

  // InvalidArgument naming the offending field(s) when a value is negative or non-finite, or when
  // the values contradict each other (high_variance_min >= exploding_variance_std;
  // variance_spike_ratio
  // <= 1).
  absl::Status Validate() const;
};

// Returns the anomalies of `record` (its `warnings` field is ignored), or the Validate() error.
absl::StatusOr<std::vector<Anomaly>> DetectAnomalies(const TraceRecord& record,
                                                     const Thresholds& thresholds = {});

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_ANOMALY_H_
