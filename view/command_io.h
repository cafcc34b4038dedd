// What the commands of `tracetorch` share at their edges: where they print and how they wait
// (CliEnvironment), the exit codes, the one error line, notes, printing a document and a diff.
// Used by the commands over trace files (file_commands.h), the command line (cli/commands.cc) and
// its daemon subcommands (cli/remote_commands.cc, cli/remote_diff.cc), so that every command
// fails and prints the same way, whether the `tracetorch` program or the Python package's
// tracetorch.cli runs it.
//
// Exit codes: 0 success; 1 `diff` found a warning or critical entry; 2 a usage error or an
// unreadable or invalid input, an unreachable daemon or an unknown session, reported as ONE line
// on stderr ("tracetorch: nope.json: file not found"). Notes that do not change the outcome (a
// trace file's warnings of a type this version does not know) are lines "tracetorch: note: ..."
// on stderr.
//
// Thread-compatible.
#ifndef TRACETORCH_VIEW_COMMAND_IO_H_
#define TRACETORCH_VIEW_COMMAND_IO_H_

#include <ostream>
#include <string>
#include <string_view>

#include "trace/diff.h"
#include "view/text.h"
#include "view/watch.h"

namespace tracetorch::view {

enum ExitCode : int {
  kExitOk = 0,
  kExitRegressions = 1,
  kExitUsage = 2,
};

// What a command may touch: injected so tests can run it without a terminal or signals.
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

// Prints "tracetorch: MESSAGE" as one line on env.err (line breaks in MESSAGE become spaces) and
// returns kExitUsage.
int Fail(const CliEnvironment& env, std::string message);

// Prints "tracetorch: note: MESSAGE" as one line on env.err; the outcome does not change.
void Note(const CliEnvironment& env, std::string message);

// Prints `text` on env.out, adding the final newline when it has none, and flushes.
void PrintLine(std::string text, const CliEnvironment& env);

// Prints `diff` as `tracetorch diff` does (RenderDiff, or DiffToJson with `json`) and returns
// kExitRegressions when it has a warning or critical entry, else kExitOk. Shared by the local and
// the remote diff.
int ReportDiff(const TraceDiff& diff, bool json, const Style& style, const CliEnvironment& env);

}  // namespace tracetorch::view

#endif  // TRACETORCH_VIEW_COMMAND_IO_H_
