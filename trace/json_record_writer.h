// Internal to trace/ (not installed; include json.h): the layout of a record and of a diff as JSON
// documents, written through the one JsonWriter (json_writer.h).
//
// Keys come in the order the Python library writes them (json_fields.h); a tensor without
// statistics has no stat keys; a record's metadata has "nan_origin" only when it is set, then its
// `extra` keys in their order. Deterministic: identical input gives identical bytes.
//
// Thread-compatible: no shared state.
#ifndef TRACETORCH_TRACE_JSON_RECORD_WRITER_H_
#define TRACETORCH_TRACE_JSON_RECORD_WRITER_H_

#include "trace/diff.h"
#include "trace/json_writer.h"
#include "trace/record.h"

namespace tracetorch {
namespace json_internal {

// Writes `record` as one JSON value (an object: metadata, layers, warnings) to `w`.
void WriteRecord(const TraceRecord& record, JsonWriter& w);

// Writes `anomaly` as one JSON value: the object a record's "warnings" holds.
void WriteAnomaly(const Anomaly& anomaly, JsonWriter& w);

// Writes `diff` as one JSON value (the `tracetorch diff --json` object) to `w`.
void WriteDiff(const TraceDiff& diff, JsonWriter& w);

}  // namespace json_internal
}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_JSON_RECORD_WRITER_H_
