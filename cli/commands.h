// The `tracetorch` command line: argument parsing (CLI11) into the subcommands inspect, summary,
// diff and watch (trace files, run by view/file_commands.h), ops (op graphs, ops_command.h),
// graph, audit, report and export, and sessions, snapshot, forensics, watch --remote / --job,
// diff --remote and baseline (a running tracetorchd; parsed here, run by a DaemonCommands,
// daemon_commands.h).
// RunTracetorchCommand is the whole command line without the daemon client (library
// tracetorch_cli_core: no protobuf, no gRPC; an agent-only build's program); RunTracetorch
// (remote_commands.h) is the `tracetorch` program, with it. main.cc is a thin wrapper over
// RunTracetorch, so the whole command can run in-process. Only the program links cli/: the
// Python extension prints with view/ (tools/check_layers).
//
// Exit codes, notes and the error line: view/command_io.h.
#ifndef TRACETORCH_CLI_COMMANDS_H_
#define TRACETORCH_CLI_COMMANDS_H_

#include "view/command_io.h"

namespace tracetorch::cli {

// Not an exit code: RunTracetorchCommand without a DaemonCommands parsed a daemon subcommand and
// ran nothing (the caller runs the `tracetorch` program for it).
inline constexpr int kNeedsDaemonClient = -1;

class DaemonCommands;  // daemon_commands.h

// Runs `tracetorch` with argv[0..argc) and returns the exit code. The daemon subcommands run on
// `daemon`; when it is null they are parsed (usage errors are reported as usual) but not run, and
// the result is kNeedsDaemonClient with nothing printed.
int RunTracetorchCommand(int argc, const char* const* argv, const view::CliEnvironment& env,
                         const DaemonCommands* daemon);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_COMMANDS_H_
