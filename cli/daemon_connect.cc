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
  return service_client::TraceServiceClient::Create(protocol::ServiceAddressFor(address), *options);
}

std::string DescribeRemoteError(const absl::Status& status, std::string_view address) {
  // The daemon answered (its baseline store is away, ...): it is running, say only what it said.
  if (service_client::AnsweredByDaemon(status)) return std::string(status.message());
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return absl::StrCat("cannot reach tracetorchd at ", protocol::DescribeServiceAddress(address),
                          ": ", status.message(), " (is the daemon running? see --remote)");
    default:
      return std::string(status.message());
  }
}

}  // namespace tracetorch::cli
