// A trace (and its per-step history) as TensorBoard scalars and text, under tags a person can
// filter in TensorBoard's search box:
//   layers/<full_name>/latency_ms       forward latency (ms)
//   layers/<full_name>/activation_std   std of the first output
//   layers/<full_name>/grad_norm        norm of the gradient of the first output
//   layers/<full_name>/non_finite       1 when the output or gradient held NaN/Inf that step, else
//   0 layers/<full_name>/nan_count        NaN elements of the outputs (latest call)
//   layers/<full_name>/inf_count        +/-Inf elements of the outputs (latest call)
//   anomalies                           the anomalies, NaN origin first, as a Markdown table (text)
// With a history, the first four are written for every step it holds (values not measured that
// step are skipped); the counts and the anomalies at the last step. Without one (a trace file),
// each layer's latest values are written once, at the run's last step (the most forward calls of a
// layer, minus one).
//
// Thread-compatible; writes through the given writer only.
#ifndef TRACETORCH_REPORT_TENSORBOARD_TRACE_EVENTS_H_
#define TRACETORCH_REPORT_TENSORBOARD_TRACE_EVENTS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "report/tensorboard/event_file.h"
#include "trace/record.h"
#include "trace/step_history.h"

namespace tracetorch::tensorboard {

// "layers/<full_name>/<metric>".
std::string LayerTag(std::string_view full_name, std::string_view metric);

// The anomalies as Markdown (a table: severity, type, layer, message; the NaN origin line first).
// Text from the trace has its Markdown and HTML characters escaped.
std::string AnomaliesMarkdown(const TraceRecord& record);

// What was written, for a caller that lists it (`tracetorch export --json`).
struct WrittenScalar {
  std::string_view tag;
  int64_t step = 0;
  double value = 0;
};
using ScalarObserver = std::function<void(const WrittenScalar&)>;

struct ExportCounts {
  uint64_t scalars = 0;
  uint64_t texts = 0;
  int64_t last_step = 0;
};

// Writes `record` with `history` (may be empty) to `writer` as described above, then flushes.
// `observe`, when set, sees every scalar written. Errors: the writer's.
absl::StatusOr<ExportCounts> WriteTraceEvents(const TraceRecord& record, const StepHistory& history,
                                              EventFileWriter* writer,
                                              const ScalarObserver& observe = {});

// The record's part at `step`: each layer's nan_count and inf_count, and the anomalies (text).
// WriteTraceEvents ends with it; a live exporter writes it when the session ends.
absl::StatusOr<uint64_t> WriteFinalEvents(const TraceRecord& record, int64_t step,
                                          EventFileWriter* writer,
                                          const ScalarObserver& observe = {});

// One layer's history points [begin, end) (a live exporter's increment): the first four tags
// above per point. Returns the scalars written.
absl::StatusOr<uint64_t> WriteLayerSteps(const LayerSteps& layer, size_t begin, size_t end,
                                         EventFileWriter* writer,
                                         const ScalarObserver& observe = {});

}  // namespace tracetorch::tensorboard

#endif  // TRACETORCH_REPORT_TENSORBOARD_TRACE_EVENTS_H_
