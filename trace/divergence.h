// Cross-rank divergence: in a job of several ranks running the same model, a layer whose forward
// latency or gradient norm on one rank departs from the median of the OTHER ranks by more than a
// relative threshold — a straggler (slow GPU, noisy neighbour) or a desynchronised rank.
//
// Thread-compatible; no shared state.
#ifndef TRACETORCH_TRACE_DIVERGENCE_H_
#define TRACETORCH_TRACE_DIVERGENCE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "trace/record.h"

namespace tracetorch {

struct DivergenceThresholds {
  double latency = 0.5;    // |rank - median(others)| / median(others) on mean forward latency.
  double grad_norm = 0.5;  // The same on gradient norm.
  // Layers faster than this on every rank are not judged: sub-0.1 ms layers jitter by more than
  // the threshold between steps (measured on a shared CPU machine), and a straggler shows on the
  // slower layers anyway.
  double min_latency_ms = 0.1;
  // InvalidArgument when a value is negative or not finite.
  absl::Status Validate() const;
};

struct RankTrace {
  int rank = 0;
  std::string label;                    // How to name the rank in messages ("rank 2").
  const TraceRecord* record = nullptr;  // Not owned.
};

// Anomalies of type kRankDivergence (severity warning), in layer order of the first rank, then by
// rank. The rule depends on how many ranks have a value for the layer:
//  - 3 or more: a rank is flagged when it departs from the median of the OTHER ranks by more than
//    the threshold and also from the median of ALL ranks by more than the threshold, so that with
//    3 ranks the normal ranks (whose others' median is pulled halfway to the straggler) are not
//    flagged with it. A rank far faster (or with a far smaller norm) than the rest is flagged too.
//  - exactly 2: there is no majority, so the larger value is judged against the smaller one: the
//    slower rank (latency) or the rank with the larger gradient norm is flagged when it exceeds
//    the other by more than the threshold (relative to the other). The faster rank is never
//    flagged: stragglers are what a two-rank job has to find.
//  - 1: nothing to compare with.
// Ranks without a record, layers or values missing on a rank, non-finite values and a zero
// reference are skipped; invalid thresholds give none (see Validate).
// details: rank (int), label, metric ("latency_ms" | "grad_norm"), value, median (the other
// ranks' median; with 2 ranks the other rank's value), ratio (value / median), threshold,
// ranks_compared.
std::vector<Anomaly> DetectRankDivergence(const std::vector<RankTrace>& ranks,
                                          const DivergenceThresholds& thresholds = {});

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_DIVERGENCE_H_
