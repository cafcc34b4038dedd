// Internal to trace/ (not installed; include json.h): from a parsed JSON document to a
// TraceRecord, with the tolerances and error messages json.h promises.
//
//  - Defaults for files from older versions (full_name, forward/backward counts, min/max/mean
//    latencies), unknown layer keys ignored, unknown metadata keys kept in TraceMetadata::extra as
//    minified JSON.
//  - A document of the wrong shape is InvalidArgument naming the field:
//    "layers[2].outputs[0].shape: expected an array of integers".
//
// Thread-compatible: no shared state.
#ifndef TRACETORCH_TRACE_JSON_RECORD_READER_H_
#define TRACETORCH_TRACE_JSON_RECORD_READER_H_

#include "absl/status/status.h"
#include "simdjson.h"
#include "trace/record.h"

namespace tracetorch {
namespace json_internal {

// Reads the document `root` into `*out` (which should be default-constructed; fields the document
// lacks keep their value there). `rewritten`: the document is the output of ApplyEdits
// (json_scanner.h), so that the sentinel strings stand for NaN/Infinity/-Infinity; otherwise they
// are plain strings. On error `*out` holds what was read so far.
absl::Status ReadRecordDocument(simdjson::dom::element root, bool rewritten, TraceRecord* out);

}  // namespace json_internal
}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_JSON_RECORD_READER_H_
