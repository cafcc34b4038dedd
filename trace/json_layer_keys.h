// The keys of one layer object of the trace JSON ("layers"[i]), in the order the Python library
// writes them: the order of its LayerTrace dataclass fields, whose `module_type` field is the key
// "type". For front doors that mirror the dataclass (positional arguments).
//
// Constant data; thread-safe.
#ifndef TRACETORCH_TRACE_JSON_LAYER_KEYS_H_
#define TRACETORCH_TRACE_JSON_LAYER_KEYS_H_

#include <string_view>

#include "absl/types/span.h"

namespace tracetorch {

absl::Span<const std::string_view> LayerJsonKeys();

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_JSON_LAYER_KEYS_H_
