// Python bindings of the analyses; see bind_analysis.h.
#include "agent/python/bind_analysis.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "agent/python/record_convert.h"
#include "agent/python/status_translate.h"
#include "trace/anomaly.h"
#include "trace/diff.h"
#include "trace/json.h"
#include "trace/record.h"

namespace tracetorch::python {
namespace {

// ---- Diff ---------------------------------------------------------------------------------------

void BindDiff(py::module_& m) {
  py::class_<DiffEntry> entry(m, "DiffEntry", "One observed change between two traces.");
  entry
      .def(py::init([](DiffSeverity severity, DiffKind kind, std::string layer, std::string message,
                       const py::object& details) {
             return DiffEntry{.severity = severity,
                              .kind = kind,
                              .layer = std::move(layer),
                              .message = std::move(message),
                              .details = DetailsFromPy(details)};
           }),
           py::arg("severity"), py::arg("kind"), py::arg("layer") = "", py::arg("message") = "",
           py::arg("details") = py::none())
      .def_readwrite("severity", &DiffEntry::severity)
      .def_readwrite("kind", &DiffEntry::kind, "DiffKind (a str: 'latency_regression', ...).")
      .def_readwrite("layer", &DiffEntry::layer)
      .def_readwrite("message", &DiffEntry::message)
      .def_property(
          "details", [](const DiffEntry& e) { return DetailsToPy(e.details); },
          [](DiffEntry& e, const py::object& d) { e.details = DetailsFromPy(d); })
      .def("to_dict", &DiffEntryToDict)
      .def("__repr__", [](const DiffEntry& e) {
        return absl::StrCat("DiffEntry(severity='", Str(ToString(e.severity)), "', kind='",
                            Str(ToString(e.kind)), "', layer=", Repr(py::str(e.layer)),
                            ", message=", Repr(py::str(e.message)), ")");
      });
  AddValueSemantics(entry);

  py::class_<TraceDiff> diff(m, "TraceDiff", R"doc(
The comparison of two traces (see diff_records). ``entries`` is a list of DiffEntry (a copy).
)doc");
  diff.def(py::init([](std::string baseline_model, std::string current_model,
                       std::vector<DiffEntry> entries) {
             return TraceDiff{.baseline_model = std::move(baseline_model),
                              .current_model = std::move(current_model),
                              .entries = std::move(entries)};
           }),
           py::arg("baseline_model") = "", py::arg("current_model") = "",
           py::arg("entries") = std::vector<DiffEntry>{})
      .def_readwrite("baseline_model", &TraceDiff::baseline_model)
      .def_readwrite("current_model", &TraceDiff::current_model)
      .def_property(
          "entries", [](const TraceDiff& d) { return ListToPy(d.entries); },
          [](TraceDiff& d, std::vector<DiffEntry> v) { d.entries = std::move(v); })
      .def_property_readonly("has_regressions", &TraceDiff::has_regressions,
                             "True when any entry is a warning or critical.")
      .def_property_readonly("critical_count", &TraceDiff::critical_count)
      .def_property_readonly("warning_count", &TraceDiff::warning_count)
      .def("to_dict", &DiffToDict, "The document `tracetorch diff --json` prints, as a dict.")
      .def(
          "to_json",
          [](const TraceDiff& d, int indent) {
            if (indent < 0) throw py::value_error("indent must be >= 0");
            return DiffToJson(d, JsonStyle{.indent = indent});
          },
          py::arg("indent") = 2)
      .def("__repr__", [](const TraceDiff& d) {
        return absl::StrCat("TraceDiff(baseline_model=", Repr(py::str(d.baseline_model)),
                            ", current_model=", Repr(py::str(d.current_model)),
                            ", entries=", d.entries.size(), ", critical_count=", d.critical_count(),
                            ", warning_count=", d.warning_count(), ")");
      });
}

// detect_anomalies and diff_records; after the classes, so that their signatures name the Python
// types.
void BindAnalysisFunctions(py::module_& m) {
  m.def(
      "detect_anomalies",
      [](const TraceRecord& record, const std::optional<Thresholds>& thresholds) {
        absl::StatusOr<std::vector<Anomaly>> found =
            DetectAnomalies(record, thresholds.value_or(Thresholds{}));
        if (!found.ok()) ThrowStatus(found.status());
        return *std::move(found);
      },
      py::arg("record"), py::arg("thresholds") = py::none(), R"doc(
Returns the anomalies of `record` as a list of Anomaly (record.warnings is ignored). ValueError when
`thresholds` is invalid.
)doc");

  const DiffThresholds defaults;
  m.def(
      "diff_records",
      [](const TraceRecord& baseline, const TraceRecord& current, double latency_threshold,
         double grad_norm_threshold, double std_threshold) {
        const DiffThresholds thresholds{
            .latency = latency_threshold, .grad_norm = grad_norm_threshold, .std = std_threshold};
        if (absl::Status s = thresholds.Validate(); !s.ok()) ThrowStatus(s);
        return DiffRecords(baseline, current, thresholds);
      },
      py::arg("baseline"), py::arg("current"), py::kw_only(),
      py::arg("latency_threshold") = defaults.latency,
      py::arg("grad_norm_threshold") = defaults.grad_norm, py::arg("std_threshold") = defaults.std,
      R"doc(
Compares two traces, matching layers by full_name. Thresholds are relative changes (0.1 = 10%);
ValueError when one is negative or not finite.
)doc");
}

}  // namespace

void BindAnalysis(py::module_& m) {
  BindDiff(m);
  BindAnalysisFunctions(m);
}

}  // namespace tracetorch::python
