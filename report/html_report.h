// One self-contained HTML file per trace or diff: no network at view time (a Content-Security-
// Policy forbids it), the charting library (Chart.js, inlined from Debian's libjs-chart.js at build
// time), our script and styles inlined, the data as one JSON document in the page.
//
// A trace's report: the model summary; the NaN origin; the anomalies, NaN origin first; charts of
// the slowest layers (and the largest memory deltas) and, when the trace has per-step history, of
// a chosen layer's latency, activation std, gradient norm and NaN/Inf over the steps; the layer
// tree (collapsible, filterable by name and type, sortable by latency, memory, gradient norm,
// activation std and NaN/Inf count); the op graph picture (draw/) when the trace holds one, the
// NaN-origin op outlined.
//
// A diff's report: the verdict and exit status first, the entries grouped by severity, every layer
// side by side (values of both traces and the change), and both per-step histories of a layer on
// one chart where the traces have them.
//
// Every string from a trace (layer names are user data) reaches the page only as JSON inside a
// <script type="application/json"> element (with '<', '>' and '&' escaped, so it cannot close the
// element), and the page's script puts it into the DOM as text, never as HTML. The layer tree and
// the layer table draw only the rows in view, so a 10,000-layer trace's page stays responsive.
//
// Thread-safe: pure functions (the op graph is drawn under draw/'s own lock).
#ifndef TRACETORCH_REPORT_HTML_REPORT_H_
#define TRACETORCH_REPORT_HTML_REPORT_H_

#include <string>

#include "absl/status/status.h"
#include "trace/diff.h"
#include "trace/record.h"
#include "trace/step_history.h"

namespace tracetorch::report {

struct ReportOptions {
  std::string generator = "tracetorch";  // "tracetorch 0.1.0", shown in the footer.
};

struct TraceReportInput {
  const TraceRecord* record = nullptr;   // Required.
  const StepHistory* history = nullptr;  // Null or empty: no per-step charts.
  std::string source;                    // "run.json", "session 2026...-1": shown in the summary.
};

// One side of a diff: what was compared. `record` may be null (only the diff is known).
struct DiffSide {
  const TraceRecord* record = nullptr;
  const StepHistory* history = nullptr;
  std::string description;  // "base.json", "baseline main", "session 2026...-1".
};

struct DiffReportInput {
  const TraceDiff* diff = nullptr;  // Required.
  DiffSide baseline;
  DiffSide current;
  DiffThresholds thresholds;
  int exit_status = 0;  // What `tracetorch diff` exits with (0 or 1).
};

// The page. An op graph that cannot be drawn does not fail the report: the page says why.
std::string RenderTraceReport(const TraceReportInput& input, const ReportOptions& options = {});
std::string RenderDiffReport(const DiffReportInput& input, const ReportOptions& options = {});

// Writes `html` to `path` atomically (trace/atomic_file.h); a new file gets 0666 less the umask.
absl::Status WriteReportFile(const std::string& path, const std::string& html);

}  // namespace tracetorch::report

#endif  // TRACETORCH_REPORT_HTML_REPORT_H_
