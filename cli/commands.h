// The `tracetorch` command line: argument parsing (CLI11) and the subcommands inspect, summary,
// diff and watch (trace files), ops (op graphs, ops_command.h), and sessions, snapshot, watch
// --remote / --job, diff --remote and baseline (a running tracetorchd; parsed here, run by a
// DaemonCommands, daemon_commands.h).
// RunTracetorchCommand is the whole command line without the daemon client (library
// tracetorch_cli_core: no protobuf, no gRPC, so the Python extension links it); RunTracetorch
// (remote_commands.h) is the `tracetorch` program, with it. main.cc is a thin wrapper over
// RunTracetorch, so the whole command can run in-process.
//
// Exit codes: 0 success; 1 `diff` found a warning or critical entry; 2 a usage error or an
// unreadable or invalid input, an unreachable daemon or an unknown session, reported as ONE line
// on stderr ("tracetorch: nope.json: file not found"). Notes that do not change the outcome (a
// trace file's warnings of a type this version does not know) are lines "tracetorch: note: ..."
// on stderr.
#ifndef TRACETORCH_CLI_COMMANDS_H_
#define TRACETORCH_CLI_COMMANDS_H_

#include <ostream>
#include <string>
#include <string_view>

#include "cli/text.h"
#include "cli/watch.h"

namespace tracetorch::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitRegressions = 1,
  kExitUsage = 2,
  // Not an exit code: RunTracetorchCommand without a DaemonCommands parsed a daemon subcommand and
  // ran nothing (the caller runs the `tracetorch` program for it).
  kNeedsDaemonClient = -1,
};

class DaemonCommands;  // daemon_commands.h

// What the command may touch: injected so tests can run it without a terminal or signals.
struct CliEnvironment {
  std::ostream* out = nullptr;  // Required.
  std::ostream* err = nullptr;  // Required.
  bool stdout_is_tty = false;
  bool no_color = false;  // NO_COLOR is set to a non-empty value.
  // How `watch` waits between polls. Empty: MakeSignalWaiter (terminal.h) blocks SIGINT and
  // SIGTERM and waits for them with sigtimedwait(2), so either signal ends the watch ("Stopped
  // watching.") with exit code 0.
  Waiter wait;
};

// Rich output for --color=always, or for "auto" on a terminal without NO_COLOR; plain otherwise.
// REQUIRES: color is "auto", "always" or "never".
Style ChooseStyle(std::string_view color, bool stdout_is_tty, bool no_color);

// Runs `tracetorch` with argv[0..argc) and returns the exit code. The daemon subcommands run on
// `daemon`; when it is null they are parsed (usage errors are reported as usual) but not run, and
// the result is kNeedsDaemonClient with nothing printed.
int RunTracetorchCommand(int argc, const char* const* argv, const CliEnvironment& env,
                         const DaemonCommands* daemon);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_COMMANDS_H_
