// What the subcommands of `tracetorch` share at their edges: the one error line, notes, printing a
// document and a diff. Used by commands.cc and the daemon subcommands (remote_commands.cc,
// remote_diff.cc), so that every command fails and prints the same way (commands.h: exit codes).
//
// Thread-compatible.
#ifndef TRACETORCH_CLI_COMMAND_IO_H_
#define TRACETORCH_CLI_COMMAND_IO_H_

#include <string>

#include "cli/commands.h"
#include "cli/text.h"
#include "trace/diff.h"

namespace tracetorch::cli {

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

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_COMMAND_IO_H_
