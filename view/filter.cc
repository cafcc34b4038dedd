#include "view/filter.h"

#include <fnmatch.h>

#include <cmath>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace tracetorch::view {

bool LayerFilter::empty() const {
  return name_glob.empty() && type.empty() && !min_latency_ms.has_value();
}

absl::Status LayerFilter::Validate() const {
  if (min_latency_ms.has_value() && (!std::isfinite(*min_latency_ms) || *min_latency_ms < 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min-latency must be a finite number of milliseconds >= 0, got ", *min_latency_ms));
  }
  return absl::OkStatus();
}

bool LayerFilter::Matches(const LayerTrace& layer) const {
  if (!name_glob.empty() && fnmatch(name_glob.c_str(), layer.full_name.c_str(), 0) != 0) {
    return false;
  }
  if (!type.empty() && layer.type != type) return false;
  if (min_latency_ms.has_value()) {
    const std::optional<double> latency =
        layer.latency_ms_mean.has_value() ? layer.latency_ms_mean : layer.latency_ms;
    if (!latency.has_value() || !(*latency >= *min_latency_ms)) return false;
  }
  return true;
}

TraceRecord ApplyFilter(const TraceRecord& record, const LayerFilter& filter) {
  if (filter.empty()) return record;
  TraceRecord out;
  out.metadata = record.metadata;
  absl::flat_hash_set<std::string> kept;
  for (const LayerTrace& layer : record.layers) {
    if (!filter.Matches(layer)) continue;
    kept.insert(layer.full_name);
    out.layers.push_back(layer);
  }
  for (const Anomaly& anomaly : record.warnings) {
    if (kept.contains(anomaly.layer)) out.warnings.push_back(anomaly);
  }
  return out;
}

}  // namespace tracetorch::view
