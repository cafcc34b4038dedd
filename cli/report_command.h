// `tracetorch report` and `tracetorch export --tensorboard`: a trace for a browser and for
// TensorBoard (report/), and the HTML report of `diff --html` (local and --remote).
//
//   tracetorch report TRACE -o report.html
//   tracetorch report --remote [ADDR] SESSION|latest -o report.html     (with per-step history)
//   tracetorch export --tensorboard DIR TRACE [--json]
//   tracetorch export --tensorboard DIR --remote [ADDR] SESSION|latest [--json]
//
// `export` writes one new event file under DIR (report/tensorboard/trace_events.h says what it
// holds) and prints where; with --json it prints {"file": PATH, "scalars": [{"tag", "step",
// "value"}...], "texts": N} instead (every scalar written, for scripts and the read-back check).
// A --remote source needs the daemon client: without one (the Python package's in-process
// command) these return kNeedsDaemonClient and print nothing.
//
// Exit codes as commands.h: 2 for an unreadable trace, an unknown session, an unreachable daemon,
// or a file that cannot be written.
//
// Thread-compatible.
#ifndef TRACETORCH_CLI_REPORT_COMMAND_H_
#define TRACETORCH_CLI_REPORT_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "cli/daemon_commands.h"
#include "report/html_report.h"

namespace tracetorch::cli {

// Writes the HTML report of a diff to `path` and says so on env.err ("tracetorch: note: HTML
// report written to PATH"). Returns kExitOk, or Fail's code when the file cannot be written.
int WriteDiffHtml(const std::string& path, const report::DiffReportInput& input,
                  const view::CliEnvironment& env);

// `report` and `export` (see above).
class ReportCommand {
 public:
  // Adds the `report` and `export` subcommands to `app`.
  explicit ReportCommand(CLI::App* app);

  bool parsed() const { return report_->parsed() || export_->parsed(); }
  int Run(const view::CliEnvironment& env, const DaemonCommands* daemon) const;

 private:
  // The trace to show: a file, or a daemon session with its history.
  struct Source {
    CLI::Option* remote_option = nullptr;
    std::string remote;
    std::string target;
  };
  absl::StatusOr<FetchedTrace> Load(const Source& source, const DaemonCommands* daemon,
                                    const view::CliEnvironment& env) const;
  int RunReport(const view::CliEnvironment& env, const DaemonCommands* daemon) const;
  int RunExport(const view::CliEnvironment& env, const DaemonCommands* daemon) const;

  CLI::App* report_ = nullptr;
  CLI::App* export_ = nullptr;
  Source report_source_;
  Source export_source_;
  std::string output_;
  std::string tensorboard_dir_;
  bool json_ = false;
};

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_REPORT_COMMAND_H_
