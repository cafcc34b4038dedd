// Python bindings of the trace data model and its analyses (the `tracetorch` package's record API).
//
// BindRecord registers on `m` (the `tracetorch._C` extension module):
//   TraceRecord, TraceMetadata, NanOrigin, LayerTrace, TensorInfo (a tensor entry: shape, dtype,
//   device, `stats`), TensorStats, Anomaly, AnomalySeverity, AnomalyType, Thresholds, DiffSeverity,
//   DiffKind, read_trace_file, write_trace_file, _describe_unknown_anomaly_types, and
//   _status_to_exception (status_translate.h). The analyses (TraceDiff, detect_anomalies,
//   diff_records) are bind_analysis.h's. Constructors, keyword arguments and defaults are those of
//   the tracetorch-ml library's dataclasses (LayerTrace also takes its fields positionally).
// The enums are `enum.StrEnum` classes whose `.value` is the JSON spelling
// (AnomalySeverity.WARNING.value == "warning"), like the tracetorch-ml library's.
//
// Every type is a binding of the C++ struct in trace/record.h or anomaly.h; the logic (JSON,
// validation) runs in C++ (record_convert.h). `to_dict()` returns exactly what `json.load` gives
// for the written file, because it is produced by the same writer (trace/json.h).
//
// Errors never leave as C++ exceptions: absl::Status codes become Python exceptions through the
// one mapping of status_translate.h (InvalidArgument -> ValueError, NotFound -> FileNotFoundError
// with .filename, PermissionDenied -> PermissionError, ...), with the C++ message.
//
// REQUIRES: called once, with the GIL held, before any other binding that takes or returns these
// types (agent/python/module.cc calls it first).
#ifndef TRACETORCH_AGENT_PYTHON_BIND_RECORD_H_
#define TRACETORCH_AGENT_PYTHON_BIND_RECORD_H_

#include <pybind11/pybind11.h>

namespace tracetorch::python {

void BindRecord(pybind11::module_& m);

}  // namespace tracetorch::python

#endif  // TRACETORCH_AGENT_PYTHON_BIND_RECORD_H_
