#include "agent/summary.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "trace/format.h"

namespace tracetorch::agent {
namespace {

// Appends "  Title:" and the three layers with the largest value of `field`, when any has one.
void AppendHeaviest(const TraceRecord& r, std::optional<int64_t> LayerTrace::*field,
                    std::string_view title, std::string* out) {
  std::vector<std::pair<int64_t, const std::string*>> top;
  for (const LayerTrace& l : r.layers) {
    if (const std::optional<int64_t>& v = l.*field; v.has_value())
      top.emplace_back(*v, &l.full_name);
  }
  if (top.empty()) return;
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  absl::StrAppend(out, "  ", std::string(title), ":\n");
  for (size_t i = 0; i < std::min<size_t>(3, top.size()); ++i) {
    absl::StrAppend(out, "    ", *top[i].second, "  ", FormatBytes(top[i].first), "\n");
  }
}

}  // namespace

std::string SessionSummary(const TraceRecord& r, int64_t steps, int64_t hook_errors) {
  int64_t params = 0;
  for (const LayerTrace& l : r.layers) params += l.params;
  std::string out = "TraceSession summary\n";
  auto row = [&out](std::string_view key, std::string_view value) {
    absl::StrAppend(&out, "  ", std::string(key),
                    std::string(16 - std::min<size_t>(16, key.size()), ' '), std::string(value),
                    "\n");
  };
  row("Model", r.metadata.model_name.empty() ? "<unnamed>" : r.metadata.model_name);
  row("PyTorch", r.metadata.pytorch_version);
  row("Device", r.metadata.active_device);
  row("Layers", absl::StrCat(r.layers.size()));
  row("Forward passes", absl::StrCat(steps));
  row("Parameters", FormatCount(params));
  row("Execution time",
      r.metadata.total_time_ms ? FormatMs(*r.metadata.total_time_ms) : std::string("running"));
  if (r.metadata.nan_origin) {
    row("NaN origin",
        absl::StrCat(r.metadata.nan_origin->layer, " (step ", r.metadata.nan_origin->step, ")"));
  }
  if (hook_errors > 0) row("Hook errors", absl::StrCat(hook_errors));
  // CUDA only: the layers that allocated the most, forward and backward.
  AppendHeaviest(r, &LayerTrace::fwd_mem_alloc_delta, "Heaviest forward allocators", &out);
  AppendHeaviest(r, &LayerTrace::bwd_mem_alloc_delta, "Heaviest backward allocators", &out);
  if (r.warnings.empty()) {
    absl::StrAppend(&out, "  Anomalies       none\n");
  } else {
    absl::StrAppend(&out, "  Anomalies       ", r.warnings.size(), "\n");
    for (const Anomaly& a : r.warnings) {
      absl::StrAppend(&out, "    [", std::string(ToString(a.severity)), "] ", a.layer, ": ",
                      a.message, "\n");
    }
  }
  return out;
}

}  // namespace tracetorch::agent
