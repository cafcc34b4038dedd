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
  return DefaultDaemonAddress();
}

std::string DefaultServiceAddressSource() {
  if (NonEmptyEnv("TRACETORCH_DAEMON_RPC") != nullptr) return "$TRACETORCH_DAEMON_RPC";
  if (NonEmptyEnv("TRACETORCH_DAEMON") != nullptr) return "$TRACETORCH_DAEMON";
  if (NonEmptyEnv("XDG_RUNTIME_DIR") != nullptr) return "$XDG_RUNTIME_DIR";
  return "";
}

}  // namespace tracetorch::protocol
