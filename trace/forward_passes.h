// A trace's forward passes, one definition for every summary (both agent doors, `tracetorch
// summary` and `inspect`, tracetorchd's metrics): the root model's calls. Sessions record them in
// the trace (metadata.extra[kForwardPassesKey], a JSON number), so a file read back says what the
// session said.
//
// Thread-compatible; pure functions.
#ifndef TRACETORCH_TRACE_FORWARD_PASSES_H_
#define TRACETORCH_TRACE_FORWARD_PASSES_H_

#include <cstdint>
#include <string_view>

#include "trace/record.h"

namespace tracetorch {

inline constexpr std::string_view kForwardPassesKey = "forward_passes";

// The count the record carries; for a record without one (a tracetorch-ml file, a record filled
// in by hand), the calls of its top-level layers: the largest forward_count among the layers of
// the smallest depth present (0 without layers). Not the largest forward_count of any layer: a
// module run twice per pass (resnet's block ReLU) would double it.
int64_t ForwardPasses(const TraceRecord& record);

// Records `passes` in `record` (replacing a count it had).
void SetForwardPasses(int64_t passes, TraceRecord* record);

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_FORWARD_PASSES_H_
