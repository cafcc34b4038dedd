// Layer selection for `tracetorch inspect` and `watch`: --filter, --type, --min-latency.
//
// Criteria combine with AND; an unset criterion matches every layer.
//
// Example:
//   LayerFilter filter{.name_glob = "blocks.*", .type = "Linear"};
//   TraceRecord shown = ApplyFilter(record, filter);  // blocks.0.fc, blocks.1.fc
//
// Thread-compatible; no shared state.
#ifndef TRACETORCH_VIEW_FILTER_H_
#define TRACETORCH_VIEW_FILTER_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "trace/record.h"

namespace tracetorch::view {

struct LayerFilter {
  // fnmatch(3) pattern on full_name, no flags: '*' also matches '.', so "blocks.*" selects every
  // layer below blocks. Empty: any name.
  std::string name_glob = "";
  // Exact class name ("Linear"). Empty: any type.
  std::string type = "";
  // Keeps layers whose latency_ms_mean (or latency_ms when the mean is unknown) is >= this many
  // milliseconds; a layer without any latency does not match.
  std::optional<double> min_latency_ms = std::nullopt;

  // True when no criterion is set.
  bool empty() const;
  // InvalidArgument when min_latency_ms is negative or not finite.
  absl::Status Validate() const;
  bool Matches(const LayerTrace& layer) const;
};

// What a view shows in place of the layers when the filter leaves none (tracetorch-ml's words).
inline constexpr char kNoLayersMatched[] = "No layers matched the filter.";

// Returns `record` with only the matching layers (in record order) and only the anomalies of those
// layers. When the filter is empty the record is returned whole, including anomalies that name no
// layer (such as a NaN origin at "<input>").
TraceRecord ApplyFilter(const TraceRecord& record, const LayerFilter& filter);

}  // namespace tracetorch::view

#endif  // TRACETORCH_VIEW_FILTER_H_
