#include "view/file_commands.h"

#include <unistd.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "trace/anomaly.h"
#include "trace/json.h"
#include "view/live_view.h"
#include "view/render.h"
#include "view/source.h"
#include "view/terminal.h"
#include "view/watch.h"

namespace tracetorch::view {
namespace {

// Replaces the stored warnings with a fresh DetectAnomalies run (default thresholds).
absl::Status Recompute(TraceRecord* record) {
  absl::StatusOr<std::vector<Anomaly>> anomalies = DetectAnomalies(*record);
  if (!anomalies.ok()) return anomalies.status();
  record->warnings = *std::move(anomalies);
  return absl::OkStatus();
}

// Says, on stderr, which warnings of `record` (read from `path`) are of a type this version does
// not know (they are kept).
void NoteUnknownAnomalyTypes(const std::string& path, const TraceRecord& record,
                             const CliEnvironment& env) {
  if (std::string note = DescribeUnknownAnomalyTypes(record); !note.empty()) {
    Note(env, absl::StrCat(path, ": ", note));
  }
}

// Loads `path`, re-running anomaly detection if asked. The error is a DescribeLoadError line.
// Warnings of a type this version does not know are kept, with a note saying so.
absl::StatusOr<TraceRecord> Load(const std::string& path, bool recompute,
                                 const CliEnvironment& env) {
  absl::StatusOr<TraceRecord> record = LoadTraceFile(path);
  if (record.ok() && !recompute) NoteUnknownAnomalyTypes(path, *record, env);
  if (!record.ok() || !recompute) return record;
  if (absl::Status s = Recompute(&*record); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": anomaly detection failed: ", s.message()));
  }
  return record;
}

}  // namespace

absl::Status ValidateWatchInterval(double interval_s) {
  if (!std::isfinite(interval_s) || interval_s <= 0 || interval_s > 86400) {
    return absl::InvalidArgumentError(
        absl::StrCat("--interval must be a number of seconds in (0, 86400], got ", interval_s));
  }
  return absl::OkStatus();
}

int RunInspect(const InspectRequest& request, const Style& style, const CliEnvironment& env) {
  if (absl::Status s = request.filter.Validate(); !s.ok()) {
    return Fail(env, std::string(s.message()));
  }
  absl::StatusOr<TraceRecord> record = Load(request.file, request.recompute, env);
  if (!record.ok()) return Fail(env, std::string(record.status().message()));
  if (request.json) {
    PrintLine(TraceToJson(ApplyFilter(*record, request.filter)), env);
  } else {
    *env.out << RenderInspect(*record, request.filter, style);
    env.out->flush();
  }
  return kExitOk;
}

int RunSummary(const SummaryRequest& request, const Style& style, const CliEnvironment& env) {
  absl::StatusOr<TraceRecord> record = Load(request.file, request.recompute, env);
  if (!record.ok()) return Fail(env, std::string(record.status().message()));
  *env.out << RenderSummary(*record, style);
  env.out->flush();
  return kExitOk;
}

absl::StatusOr<ComparedTraces> CompareTraceFiles(const DiffRequest& request,
                                                 const CliEnvironment& env) {
  if (request.current.empty()) {
    return absl::InvalidArgumentError(
        "diff needs two traces: BASELINE CURRENT (see 'tracetorch diff --help')");
  }
  if (absl::Status s = request.thresholds.Validate(); !s.ok()) {
    return s;  // InvalidArgument: "invalid diff thresholds: ..."
  }
  // One file after the other through one read buffer and one parser: at once on two threads was
  // no faster (a diff's time is mostly page faults) and held two parsed documents at the peak.
  std::vector<absl::StatusOr<TraceRecord>> records =
      LoadTraceFiles({request.baseline, request.current});
  absl::StatusOr<TraceRecord>& baseline = records[0];
  absl::StatusOr<TraceRecord>& current = records[1];
  if (!baseline.ok()) return baseline.status();
  NoteUnknownAnomalyTypes(request.baseline, *baseline, env);
  if (!current.ok()) return current.status();
  NoteUnknownAnomalyTypes(request.current, *current, env);
  TraceDiff diff = DiffRecords(*baseline, *current, request.thresholds);
  return ComparedTraces{
      .baseline = *std::move(baseline), .current = *std::move(current), .diff = std::move(diff)};
}

int RunDiff(const DiffRequest& request, const Style& style, const CliEnvironment& env) {
  absl::StatusOr<ComparedTraces> compared = CompareTraceFiles(request, env);
  if (!compared.ok()) return Fail(env, std::string(compared.status().message()));
  return ReportDiff(compared->diff, request.json, style, env);
}

int RunWatchFile(const WatchFileRequest& request, const Style& style, const CliEnvironment& env) {
  if (absl::Status s = request.filter.Validate(); !s.ok()) {
    return Fail(env, std::string(s.message()));
  }
  if (absl::Status s = ValidateWatchInterval(request.interval_s); !s.ok()) {
    return Fail(env, std::string(s.message()));
  }
  FileTraceSource source(request.file);
  const LayerFilter& filter = request.filter;
  const bool recompute = request.recompute;
  const bool tty = env.stdout_is_tty;
  // The live view's body (live_view.h) without history: a file holds no per-step values.
  FrameRenderer render = [&filter, &style, recompute, tty](const TraceRecord& record) {
    LiveViewOptions view;
    view.style = style;
    view.filter = filter;
    view.width = tty ? QueryTerminalSize(STDOUT_FILENO).columns : 0;
    if (!recompute) return TruncateLines(RenderLiveBody(record, nullptr, view), view.width, style);
    TraceRecord copy = record;
    (void)Recompute(
        &copy);  // Cannot fail with the default thresholds; keeps the stored ones if so.
    return TruncateLines(RenderLiveBody(copy, nullptr, view), view.width, style);
  };
  WatchOptions options{
      .label = request.file,
      .interval = absl::Seconds(request.interval_s),
      .redraw_in_place = env.stdout_is_tty,
      .style = style,
  };
  Watcher watcher(&source, std::move(render), std::move(options), env.out);
  watcher.Run(env.wait ? env.wait : MakeSignalWaiter());
  return kExitOk;
}

}  // namespace tracetorch::view
