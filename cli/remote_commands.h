// The `tracetorch` program: the command line of commands.h with its daemon subcommands (sessions,
// snapshot, baseline, diff --remote, watch --remote / --job) run over tracetorchd's gRPC
// TraceService (service_client/).
//
// Thread-compatible.
#ifndef TRACETORCH_CLI_REMOTE_COMMANDS_H_
#define TRACETORCH_CLI_REMOTE_COMMANDS_H_

#include "cli/commands.h"
#include "cli/daemon_commands.h"
#include "view/text.h"

namespace tracetorch::cli {

// DaemonCommands over the TraceService at the requested address (default:
// protocol::DefaultServiceAddress()), with the token and TLS options of the environment.
class GrpcDaemonCommands final : public DaemonCommands {
 public:
  int Sessions(const SessionsRequest& request, const view::CliEnvironment& env) const override;
  int Snapshot(const SnapshotRequest& request, const view::CliEnvironment& env) const override;
  int Diff(const RemoteDiffRequest& request, const view::Style& style,
           const view::CliEnvironment& env) const override;
  int Baseline(const BaselineRequest& request, const view::CliEnvironment& env) const override;
  int Watch(const RemoteWatchRequest& request, const view::Style& style,
            const view::CliEnvironment& env) const override;
  absl::StatusOr<FetchedTrace> Fetch(const FetchRequest& request) const override;
  int Forensics(const ForensicsRequest& request, const view::Style& style,
                const view::CliEnvironment& env) const override;
};

// Runs `tracetorch` with argv[0..argc) (RunTracetorchCommand with GrpcDaemonCommands) and returns
// the exit code.
int RunTracetorch(int argc, const char* const* argv, const view::CliEnvironment& env);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_REMOTE_COMMANDS_H_
