#include "cli/daemon_connect.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "protocol/address.h"

namespace tracetorch::cli {

absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> ConnectToDaemon(
    const std::string& address, absl::Duration deadline) {
  absl::StatusOr<service_client::ServiceClientOptions> options =
      service_client::ServiceClientOptionsFromEnv();
  if (!options.ok()) return options.status();
  options->deadline = std::max(options->deadline, deadline);
  return service_client::TraceServiceClient::Create(address, *options);
}

std::string DescribeRemoteError(const absl::Status& status, std::string_view address) {
  // The daemon answered (its baseline store is away, ...): it is running, say only what it said.
  if (service_client::AnsweredByDaemon(status)) return std::string(status.message());
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return CannotReachDaemon(absl::string_view(address.data(), address.size()), status.message());
    default:
      return std::string(status.message());
  }
}

std::string CannotReachDaemon(absl::string_view address, absl::string_view detail) {
  const std::string head = absl::StrCat("cannot reach tracetorchd at ", address);
  if (address != protocol::DefaultServiceAddress()) {
    return absl::StrCat(head, ": ", detail, " (is the daemon running? see --remote)");
  }
  const std::string source = protocol::DefaultServiceAddressSource();
  const std::string from =
      source.empty()
          ? "the system default: no --remote, TRACETORCH_DAEMON and XDG_RUNTIME_DIR unset"
      : source == "$XDG_RUNTIME_DIR"
          ? "your default under $XDG_RUNTIME_DIR: no --remote, TRACETORCH_DAEMON unset"
          : absl::StrCat("from ", source);
  return absl::StrCat(head, " (", from, "): ", detail,
                      "; is tracetorchd running there? Name its socket with --remote SOCKET or "
                      "TRACETORCH_DAEMON=SOCKET");
}

}  // namespace tracetorch::cli
