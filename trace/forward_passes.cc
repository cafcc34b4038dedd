#include "trace/forward_passes.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tracetorch {

int64_t ForwardPasses(const TraceRecord& record) {
  if (const std::string* text = record.metadata.FindExtra(kForwardPassesKey)) {
    int64_t passes = 0;
    if (absl::SimpleAtoi(*text, &passes) && passes >= 0) return passes;
  }
  int32_t top = std::numeric_limits<int32_t>::max();
  for (const LayerTrace& layer : record.layers) top = std::min(top, layer.depth);
  int64_t passes = 0;
  for (const LayerTrace& layer : record.layers) {
    if (layer.depth == top) passes = std::max(passes, layer.forward_count);
  }
  return passes;
}

void SetForwardPasses(int64_t passes, TraceRecord* record) {
  record->metadata.SetExtra(kForwardPassesKey, absl::StrCat(passes));
}

}  // namespace tracetorch
