#include "agent/summary.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "trace/format.h"
#include "trace/forward_passes.h"

namespace tracetorch::agent {
namespace {

void Line(std::string_view key, std::string_view value, std::string* out) {
  absl::StrAppend(out, std::string(key), ": ", std::string(value), "\n");
}

// The layer with the largest positive `mean` field, or nullptr.
const LayerTrace* Slowest(const TraceRecord& r, std::optional<double> LayerTrace::*mean) {
  const LayerTrace* best = nullptr;
  for (const LayerTrace& l : r.layers) {
    const double v = (l.*mean).value_or(0.0);
    if (v > 0 && (best == nullptr || v > (best->*mean).value_or(0.0))) best = &l;
  }
  return best;
}

std::string Timing(const std::optional<double>& mean, const std::optional<double>& max,
                   int64_t count, std::string_view pass) {
  return absl::StrCat(FormatMs(mean.value_or(0.0)), " mean / ", FormatMs(max.value_or(0.0)),
                      " max over ", count, " ", std::string(pass));
}

// "fc (+5.00MiB alloc, +8.00MiB reserved); then conv (+1.00MiB), head (+512B)": the three layers
// that allocated the most (positive deltas only), or "" when none did.
std::string Heaviest(const TraceRecord& r, std::optional<int64_t> LayerTrace::*alloc,
                     std::optional<int64_t> LayerTrace::*reserved) {
  std::vector<const LayerTrace*> top;
  for (const LayerTrace& l : r.layers) {
    if ((l.*alloc).value_or(0) > 0) top.push_back(&l);
  }
  if (top.empty()) return "";
  std::stable_sort(top.begin(), top.end(), [alloc](const LayerTrace* a, const LayerTrace* b) {
    return *(a->*alloc) > *(b->*alloc);
  });
  const auto bytes = [](const std::optional<int64_t>& v) {
    return v.has_value() ? absl::StrCat(*v >= 0 ? "+" : "", FormatBytes(*v)) : std::string("+-");
  };
  std::string out = absl::StrCat(top[0]->full_name, " (", bytes(top[0]->*alloc), " alloc, ",
                                 bytes(top[0]->*reserved), " reserved)");
  for (size_t i = 1; i < std::min<size_t>(3, top.size()); ++i) {
    absl::StrAppend(&out, i == 1 ? "; then " : ", ", top[i]->full_name, " (", bytes(top[i]->*alloc),
                    ")");
  }
  return out;
}

}  // namespace

std::string SessionSummary(const TraceRecord& r, int64_t steps, int64_t hook_errors) {
  int64_t params = 0;
  for (const LayerTrace& l : r.layers) params += l.params;
  const bool live = steps >= 0;
  std::string out;
  Line("Model", r.metadata.model_name.empty() ? "<unnamed>" : r.metadata.model_name, &out);
  Line("Layers traced", absl::StrCat(r.layers.size()), &out);
  Line("Total parameters", FormatCount(params), &out);
  Line("Total time",
       r.metadata.total_time_ms ? FormatMs(*r.metadata.total_time_ms)
                                : (live ? std::string("running") : FormatMs(0.0)),
       &out);
  Line("Forward passes", absl::StrCat(ForwardPasses(r)), &out);
  if (const LayerTrace* l = Slowest(r, &LayerTrace::latency_ms_mean)) {
    Line("Slowest layer",
         absl::StrCat(l->full_name, " (",
                      Timing(l->latency_ms_mean, l->latency_ms_max, l->forward_count, "fwd"), ")"),
         &out);
  }
  if (const LayerTrace* l = Slowest(r, &LayerTrace::bwd_latency_ms_mean)) {
    Line("Slowest backward",
         absl::StrCat(
             l->full_name, " (",
             Timing(l->bwd_latency_ms_mean, l->bwd_latency_ms_max, l->backward_count, "bwd"), ")"),
         &out);
  }
  // CUDA only: the layers that allocated the most, forward and backward.
  if (std::string fwd =
          Heaviest(r, &LayerTrace::fwd_mem_alloc_delta, &LayerTrace::fwd_mem_reserved_delta);
      !fwd.empty()) {
    Line("Heaviest fwd mem", fwd, &out);
  }
  if (std::string bwd =
          Heaviest(r, &LayerTrace::bwd_mem_alloc_delta, &LayerTrace::bwd_mem_reserved_delta);
      !bwd.empty()) {
    Line("Heaviest bwd mem", bwd, &out);
  }
  if (!r.metadata.pytorch_version.empty()) Line("PyTorch", r.metadata.pytorch_version, &out);
  Line("Device", r.metadata.active_device, &out);
  if (r.metadata.nan_origin) {
    Line("NaN origin",
         absl::StrCat(r.metadata.nan_origin->layer, " (step ", r.metadata.nan_origin->step, ")"),
         &out);
  }
  if (hook_errors > 0) Line("Hook errors", absl::StrCat(hook_errors), &out);
  if (r.warnings.empty()) {
    Line("Anomalies detected", "0", &out);
  } else {
    Line("Anomalies detected", absl::StrCat(r.warnings.size()), &out);
    for (const Anomaly& a : r.warnings) {
      const std::string_view icon = a.severity == AnomalySeverity::kCritical ? "✗" : "⚠";
      absl::StrAppend(&out, "  ", std::string(icon), " [", std::string(ToString(a.severity)), "] ",
                      a.layer, ": ", a.message, "\n");
    }
  }
  return out;
}

}  // namespace tracetorch::agent
