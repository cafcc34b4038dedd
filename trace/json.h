// Reading and writing traces as JSON, in the layout of the tracetorch-ml Python library.
//
// Reading is tolerant the way that library's loader is:
//  - accepts the non-standard number tokens `NaN`, `Infinity` and `-Infinity` that Python's json
//    module writes;
//  - accepts files from older versions that lack the aggregation fields: `full_name` defaults to
//    `name`, `depth`/`params` to 0, `forward_count` to 1 when a non-zero latency is present (else
//    0), and likewise `backward_count` from `bwd_latency_ms`; missing min/max/mean latencies
//    default to the latest latency;
//  - reads the library's `latency_ms` / `bwd_latency_ms` of 0.0 on a layer with no forward (no
//    backward) as not measured;
//  - keeps unknown metadata keys (TraceMetadata::extra) and ignores unknown layer keys;
//  - keeps a warning whose type it does not know, as AnomalyType::kUnknown with its spelling
//    (DescribeUnknownAnomalyTypes() says so for the user).
// Errors are InvalidArgument with a message a person can act on: for malformed JSON it names the
// line and column ("line 3, column 17: ..."); for a well-formed document of the wrong shape it
// names the field ("layers[2].outputs[0].shape: expected an array of integers").
//
// Writing is strict RFC 8259: a non-finite double becomes `null`. As the library does, the latest
// latency of a layer that never ran a forward (a backward) is written 0.0, not null, so that its
// tools can read our files. Output is deterministic (fixed key order, shortest round-trip
// doubles), so identical records give identical bytes.
//
// All functions are thread-compatible: they share no state. (Each thread that reads keeps one
// simdjson parser, with its buffers, for reuse; documents over 64 MiB get a parser of their own.)
#ifndef TRACETORCH_TRACE_JSON_H_
#define TRACETORCH_TRACE_JSON_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trace/diff.h"
#include "trace/json_writer.h"  // JsonWriter, AppendJsonString: for documents that are not records.
#include "trace/record.h"

namespace tracetorch {

struct JsonStyle {
  // Spaces per nesting level; 0 writes everything on one line (smallest, for the wire and snapshots
  // polled often). The Python library writes indent 2.
  int indent = 2;
};

// Parses a whole trace document.
absl::StatusOr<TraceRecord> ParseTraceJson(std::string_view text);

// Reads and parses `path`. NotFound when the file does not exist, PermissionDenied when it cannot
// be opened, InvalidArgument (message prefixed with nothing: callers add the path) when it is empty
// or invalid.
absl::StatusOr<TraceRecord> ReadTraceFile(const std::string& path);

// ReadTraceFile of each of `paths`, one after the other, a result per path in their order. The
// files share one read buffer and one parser, so that reading two costs the memory of one file's
// bytes and one parsed document besides the records (and their page faults once): the buffer is
// freed once the last file is parsed, before its record is built. (Read at once on two threads,
// two 17 MiB traces took 2.7 times their size at the peak, 2 times one after the other, and no
// longer.)
std::vector<absl::StatusOr<TraceRecord>> ReadTraceFiles(absl::Span<const std::string> paths);

std::string TraceToJson(const TraceRecord& record, JsonStyle style = {});

// Writes `record` to `path` atomically (see atomic_file.h): a concurrent reader sees the old file
// or the new one, never a torn write.
absl::Status WriteTraceFile(const std::string& path, const TraceRecord& record,
                            JsonStyle style = {});

// The diff document `tracetorch diff --json` prints: baseline_model, current_model,
// has_regressions, critical_count, warning_count, entries[] (severity, kind, layer, message,
// details).
std::string DiffToJson(const TraceDiff& diff, JsonStyle style = {});

// Writes `anomaly` to `w` as one JSON value, the object a record's "warnings" holds: type,
// severity, layer, message, details. For documents that carry anomalies but are not records.
void WriteAnomalyJson(const Anomaly& anomaly, JsonWriter& w);

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_JSON_H_
