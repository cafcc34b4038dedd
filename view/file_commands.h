// The commands over trace files, once their arguments are known: `tracetorch inspect`, `summary`,
// `diff` and `watch FILE`. The `tracetorch` program parses a command line into these requests
// (cli/commands.cc); the Python package's tracetorch.cli (inspect_command, ...) fills them from
// its keyword arguments (agent/python/bind_cli.cc). Both therefore print the same text, the same
// JSON and the same errors, and return the same exit codes (command_io.h).
//
// Each Run* loads what it needs, prints on env.out (errors and notes on env.err, one line each)
// and returns the exit code. Invalid requests (a negative --min-latency, a threshold that is not
// a finite non-negative number, an interval outside (0, 86400] seconds) are usage errors (2), as
// are files that cannot be read. Warnings of a type this version does not know are kept, with a
// note saying so.
//
// Example:
//   const CliEnvironment env{.out = &std::cout, .err = &std::cerr, .wait = {}};
//   int code = RunInspect({.file = "train.json", .filter = {.type = "Linear"}}, Style::Plain(),
//   env);
//
// Thread-compatible.
#ifndef TRACETORCH_VIEW_FILE_COMMANDS_H_
#define TRACETORCH_VIEW_FILE_COMMANDS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trace/diff.h"
#include "trace/record.h"
#include "view/command_io.h"
#include "view/filter.h"
#include "view/text.h"

namespace tracetorch::view {

// `inspect FILE [--filter G] [--type T] [--min-latency MS] [--json] [--recompute]`: the summary
// panel, the layer tree and the anomalies; with `json`, the filtered record as JSON.
struct InspectRequest {
  std::string file = "";
  LayerFilter filter = {};
  bool json = false;
  bool recompute = false;  // Re-run anomaly detection instead of showing the stored anomalies.
};
int RunInspect(const InspectRequest& request, const Style& style, const CliEnvironment& env);

// `summary FILE [--recompute]`: the summary panel and the anomaly counts.
struct SummaryRequest {
  std::string file = "";
  bool recompute = false;
};
int RunSummary(const SummaryRequest& request, const Style& style, const CliEnvironment& env);

// `diff BASELINE CURRENT [--*-threshold X] [--json]`: exit code 1 when a warning or critical
// entry was found.
struct DiffRequest {
  std::string baseline = "";
  std::string current = "";  // Empty: a usage error ("diff needs two traces").
  DiffThresholds thresholds = {};
  bool json = false;
};
int RunDiff(const DiffRequest& request, const Style& style, const CliEnvironment& env);

// What RunDiff compares, for a caller that does more with it than print it (the command line's
// `diff --html`, which also writes the diff's HTML report, report/).
struct ComparedTraces {
  TraceRecord baseline;
  TraceRecord current;
  TraceDiff diff;
};
// RunDiff without printing the diff: the same checks, loads and notes (on env.err). On error, the
// message is the one line RunDiff fails with: InvalidArgument for a request without `current` or
// with invalid thresholds, else the file's load error.
absl::StatusOr<ComparedTraces> CompareTraceFiles(const DiffRequest& request,
                                                 const CliEnvironment& env);

// `watch FILE [--interval S] [filters] [--recompute]`: redraws FILE's view whenever it changes,
// waiting with env.wait (MakeSignalWaiter when empty) until it says stop, then exit code 0.
struct WatchFileRequest {
  std::string file = "";
  LayerFilter filter = {};
  double interval_s = 0.5;
  bool recompute = false;
};
int RunWatchFile(const WatchFileRequest& request, const Style& style, const CliEnvironment& env);

// InvalidArgument ("--interval must be a number of seconds in (0, 86400], got X") unless
// 0 < interval_s <= 86400. For every `watch`, of a file or of a daemon session.
absl::Status ValidateWatchInterval(double interval_s);

}  // namespace tracetorch::view

#endif  // TRACETORCH_VIEW_FILE_COMMANDS_H_
