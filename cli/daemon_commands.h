// The subcommands of `tracetorch` that talk to a running tracetorchd: what the command line asked
// for (parsed by RunTracetorchCommand, commands.h, in every build of the command) and the interface
// that runs it. The implementation over the daemon's gRPC TraceService is GrpcDaemonCommands
// (remote_commands.h, library tracetorch_cli_lib); the Python package's in-process command has no
// daemon client and runs the `tracetorch` program for these instead.
//
// Plain data: no protobuf, no gRPC, so that the command line links without them.
#ifndef TRACETORCH_CLI_DAEMON_COMMANDS_H_
#define TRACETORCH_CLI_DAEMON_COMMANDS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trace/diff.h"
#include "trace/record.h"
#include "trace/step_history.h"
#include "view/command_io.h"
#include "view/filter.h"
#include "view/text.h"

namespace tracetorch::cli {

// `sessions [--remote ADDR] [--json]`.
struct SessionsRequest {
  std::string remote;  // Empty: the default service address.
  bool json = false;
};

// `snapshot SESSION|latest [-o FILE] [--remote ADDR]`.
struct SnapshotRequest {
  std::string session;
  std::string output;  // Empty: stdout.
  std::string remote;
};

// `diff --remote [ADDR] BASELINE CURRENT`: the operands as written (see remote_diff.h), after
// --remote's optional value was put back where it belonged.
struct RemoteDiffRequest {
  std::string address;  // Empty: the default service address.
  std::string baseline;
  std::string current;
  DiffThresholds thresholds;
  bool json = false;
  std::string html;  // --html FILE: also write the diff's HTML report there (report/).
};

// A session's trace with its per-step history, for `report --remote` and `export --remote`.
struct FetchRequest {
  std::string remote;   // Empty: the default service address; A,B,...: the daemon that has it.
  std::string session;  // An id, or "latest".
};
struct FetchedTrace {
  TraceRecord record;
  StepHistory history;
  std::string description;  // "session 20260101T...-1".
};

// `baseline set NAME SOURCE | list [--json] | rm NAME`, each with [--remote ADDR].
struct BaselineRequest {
  enum class Action { kSet, kList, kRemove };
  Action action = Action::kList;
  std::string name;
  std::string source;
  std::string remote;
  bool json = false;
};

// `watch --remote [ADDR] [SESSION]` / `watch --job JOB`.
struct RemoteWatchRequest {
  std::string remote_value;          // --remote's value ("" when given bare).
  std::vector<std::string> targets;  // The positional words.
  std::string job_id;
  std::optional<double> interval_s;  // --interval when given.
  bool json = false;
  double connect_timeout_s = 3.0;
  view::LayerFilter filter;
};

// `forensics [SESSION|latest] [--now] | --job JOB`, with [--remote ADDR|A,B,...] [--json]
// [--perfetto FILE]: a session's forensic bundles, or a job's view over its ranks.
struct ForensicsRequest {
  std::string session;  // Empty: "latest" (without --job).
  std::string job_id;   // Set: the job view.
  std::string remote;   // Empty: the default service address.
  bool json = false;
  bool now = false;      // Also a bundle taken now from a live session's flight recorder.
  std::string perfetto;  // Write the flight recorder's ring as a Chrome/Perfetto trace here.
};

// Runs the daemon subcommands. Each returns the exit code (commands.h) and prints what the command
// prints, errors included, on env.out / env.err.
class DaemonCommands {
 public:
  virtual ~DaemonCommands() = default;

  virtual int Sessions(const SessionsRequest& request, const view::CliEnvironment& env) const = 0;
  virtual int Snapshot(const SnapshotRequest& request, const view::CliEnvironment& env) const = 0;
  virtual int Diff(const RemoteDiffRequest& request, const view::Style& style,
                   const view::CliEnvironment& env) const = 0;
  virtual int Baseline(const BaselineRequest& request, const view::CliEnvironment& env) const = 0;
  virtual int Watch(const RemoteWatchRequest& request, const view::Style& style,
                    const view::CliEnvironment& env) const = 0;
  // Fetches without printing; the error's message is the one line to print.
  virtual absl::StatusOr<FetchedTrace> Fetch(const FetchRequest& request) const = 0;
  virtual int Forensics(const ForensicsRequest& request, const view::Style& style,
                        const view::CliEnvironment& env) const = 0;
};

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_DAEMON_COMMANDS_H_
