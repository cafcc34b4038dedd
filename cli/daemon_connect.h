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
#include "absl/time/time.h"
#include "service_client/service_client.h"

namespace tracetorch::cli {

// A client of the TraceService at `address` (the agents' socket stands for the service socket
// beside it: protocol::ServiceAddressFor) with the options from the environment
// (service_client::ServiceClientOptionsFromEnv: token, TLS) and at least `deadline` per call.
// The error is one line for the user (a TLS file that cannot be read, an empty address).
absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> ConnectToDaemon(
    const std::string& address, absl::Duration deadline);

// One line for a failed call to the daemon at `address`: "cannot reach tracetorchd at ADDR: ...
// (is the daemon running? see --remote)" for Unavailable and DeadlineExceeded, ADDR naming both
// sockets for the agents' socket (protocol::DescribeServiceAddress); otherwise the status message
// as it is.
std::string DescribeRemoteError(const absl::Status& status, std::string_view address);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_DAEMON_CONNECT_H_
