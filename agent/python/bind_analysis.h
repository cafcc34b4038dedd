// Python bindings of the analyses over trace records (trace/anomaly.h, trace/diff.h).
//
// BindAnalysis registers on `m` (the `tracetorch._C` extension module):
//   TraceDiff, DiffEntry (DiffSeverity and DiffKind are created with the record types),
//   detect_anomalies(record, thresholds=None) -> list[Anomaly],
//   diff_records(baseline, current, *, latency_threshold, grad_norm_threshold, std_threshold).
// The logic runs in C++; errors are raised through the one Status mapping (status_translate.h).
//
// REQUIRES: BindRecord(m) was called first (the signatures name its types), with the GIL held.
#ifndef TRACETORCH_AGENT_PYTHON_BIND_ANALYSIS_H_
#define TRACETORCH_AGENT_PYTHON_BIND_ANALYSIS_H_

#include <pybind11/pybind11.h>

namespace tracetorch::python {

void BindAnalysis(pybind11::module_& m);

}  // namespace tracetorch::python

#endif  // TRACETORCH_AGENT_PYTHON_BIND_ANALYSIS_H_
