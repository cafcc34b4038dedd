// What the subcommands of `tracetorch` share at their edges: the one error line, printing a
// document, and the connection to tracetorchd's TraceService. Used by commands.cc and
// remote_diff.cc, so that every command fails and prints the same way (commands.h: exit codes).
//
// Thread-compatible.
#ifndef TRACETORCH_CLI_COMMAND_IO_H_
#define TRACETORCH_CLI_COMMAND_IO_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/commands.h"
#include "service_client/service_client.h"

namespace tracetorch::cli {

// Prints "tracetorch: MESSAGE" as one line on env.err (line breaks in MESSAGE become spaces) and
// returns kExitUsage.
int Fail(const CliEnvironment& env, std::string message);

// Prints `text` on env.out, adding the final newline when it has none, and flushes.
void PrintLine(std::string text, const CliEnvironment& env);

// A client of the TraceService at `address` with the options from the environment
// (service_client::ServiceClientOptionsFromEnv: token, TLS) and at least `deadline` per call.
// The error is one line for the user (a TLS file that cannot be read, an empty address).
absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> ConnectToDaemon(
    const std::string& address, absl::Duration deadline);

// One line for a failed call to the daemon at `address`: "cannot reach tracetorchd at ADDR: ...
// (is the daemon running? see --remote)" for Unavailable and DeadlineExceeded; otherwise the
// status message as it is.
std::string DescribeRemoteError(const absl::Status& status, std::string_view address);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_COMMAND_IO_H_
