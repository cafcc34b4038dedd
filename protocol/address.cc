#include "protocol/address.h"

#include <sys/un.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tracetorch::protocol {
namespace {

const char* NonEmptyEnv(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

}  // namespace

absl::StatusOr<std::string> ParseDaemonAddress(std::string_view address_in) {
  const absl::string_view address(address_in.data(), address_in.size());
  absl::string_view path = address;
  if (absl::StartsWith(path, "unix://")) {
    path.remove_prefix(7);
  } else if (absl::StartsWith(path, "unix:")) {
    path.remove_prefix(5);
  } else if (absl::StrContains(path, "://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported daemon address \"", address,
                     "\": tracetorchd ingest listens on a Unix socket (PATH or unix://PATH)"));
  }
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty daemon socket path in address \"", address, "\""));
  }
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("daemon socket path is ", path.size(),
                                                   " bytes; a Unix socket path holds at most ",
                                                   sizeof(sockaddr_un::sun_path) - 1));
  }
  return std::string(path);
}

std::string DefaultDaemonAddress() {
  if (const char* env = NonEmptyEnv("TRACETORCH_DAEMON")) return env;
  if (const char* xdg = NonEmptyEnv("XDG_RUNTIME_DIR")) {
    return absl::StrCat(xdg, "/tracetorch/", kIngestSocketName);
  }
  return absl::StrCat("/run/tracetorch/", kIngestSocketName);
}

std::string ServiceSocketBeside(std::string_view ingest_path) {
  const size_t slash = ingest_path.rfind('/');
  if (slash == std::string_view::npos) return absl::StrCat("./", kServiceSocketName);
  return absl::StrCat(absl::string_view(ingest_path.data(), slash + 1), kServiceSocketName);
}

std::string DefaultServiceAddress() {
  if (const char* rpc = NonEmptyEnv("TRACETORCH_DAEMON_RPC")) return rpc;
  absl::StatusOr<std::string> ingest = ParseDaemonAddress(DefaultDaemonAddress());
  if (!ingest.ok()) return absl::StrCat("/run/tracetorch/", kServiceSocketName);
  return ServiceSocketBeside(*ingest);
}

std::string ServiceAddressFor(std::string_view address_in) {
  const absl::string_view address(address_in.data(), address_in.size());
  absl::string_view path = address;
  if (absl::StartsWith(path, "unix://")) {
    path.remove_prefix(7);
  } else if (absl::StartsWith(path, "unix:")) {
    path.remove_prefix(5);
  } else if (absl::StrContains(path, "://")) {
    return std::string(address);
  }
  const size_t slash = path.rfind('/');
  const absl::string_view name = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  if (name != kIngestSocketName) return std::string(address);
  return ServiceSocketBeside(std::string_view(path.data(), path.size()));
}

std::string DescribeServiceAddress(std::string_view address) {
  const std::string service = ServiceAddressFor(address);
  if (service == address) return service;
  return absl::StrCat(service, " (the service socket beside the agents' socket ",
                      absl::string_view(address.data(), address.size()), ")");
}

}  // namespace tracetorch::protocol
