// The connection of the daemon subcommands to tracetorchd's TraceService, and how their failures
// read. Used by remote_commands.cc and remote_diff.cc.
//
// Thread-compatible.
#ifndef TRACETORCH_CLI_DAEMON_CONNECT_H_
#define TRACETORCH_CLI_DAEMON_CONNECT_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service_client/service_client.h"

namespace tracetorch::cli {

// A client of the TraceService at `address` (either of a daemon's sockets, or HOST:PORT) with the
// options from the environment (service_client::ServiceClientOptionsFromEnv: token, TLS) and at
// least `deadline` per call. The error is one line for the user (a TLS file that cannot be read,
// an empty address).
absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> ConnectToDaemon(
    const std::string& address, absl::Duration deadline);

// One line for a failed call to the daemon at `address`: CannotReachDaemon() for Unavailable and
// DeadlineExceeded; otherwise the status message as it is (the daemon answered).
std::string DescribeRemoteError(const absl::Status& status, std::string_view address);

// "cannot reach tracetorchd at ADDR: DETAIL" and what to do next. When ADDR is the default
// (protocol::DefaultServiceAddress(): no --remote), it says where that came from and how to point
// at another daemon:
//   cannot reach tracetorchd at /run/tracetorch/tracetorchd.sock (the default: no --remote,
//   TRACETORCH_DAEMON unset): connection refused; start tracetorchd, or name its socket with
//   --remote SOCKET or TRACETORCH_DAEMON=SOCKET
// otherwise "... (is the daemon running? see --remote)".
std::string CannotReachDaemon(absl::string_view address, absl::string_view detail);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_DAEMON_CONNECT_H_
