// TLS channel credentials from PEM files, and the options tools read from the environment.
#include "service_client/credentials.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/credentials.h"

namespace tracetorch::service_client {
namespace {

constexpr size_t kMaxFileBytes = 1 << 20;

// The whole file; NotFound when missing, InvalidArgument (naming the file) when it cannot be read
// or is too large.
absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
    return absl::InvalidArgumentError(message);
  }
  std::ostringstream data;
  data << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": read error"));
  }
  std::string out = data.str();
  if (out.size() > kMaxFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": larger than ", kMaxFileBytes, " bytes"));
  }
  return out;
}

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  absl::StatusOr<std::string> pem = ReadFile(path, what);
  if (!pem.ok()) return pem.status();
  if (!absl::StrContains(*pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": not a PEM file (no -----BEGIN line)"));
  }
  return pem;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ServiceClientOptions& options) {
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client certificate needs its key, and a key its certificate "
        "(TRACETORCH_TLS_CERT and TRACETORCH_TLS_KEY)");
  }
  if (options.tls_ca_file.empty()) {
    if (!options.tls_cert_file.empty() || !options.tls_server_name.empty()) {
      return absl::InvalidArgumentError(
          "a TLS client certificate or server name needs the CA that signed the daemon's "
          "certificate (TRACETORCH_TLS_CA)");
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadPem(options.tls_ca_file, "TLS CA");
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *std::move(ca);
  if (!options.tls_cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(options.tls_cert_file, "TLS client certificate");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(options.tls_key_file, "TLS client key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

grpc::ChannelArguments MakeChannelArguments(const ServiceClientOptions& options) {
  grpc::ChannelArguments args;
  // Snapshots and job views of large models exceed gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(256 << 20);
  if (!options.tls_ca_file.empty() && !options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  return args;
}

absl::StatusOr<ServiceClientOptions> ServiceClientOptionsFromEnv() {
  ServiceClientOptions options;
  options.token = std::string(absl::StripAsciiWhitespace(Env("TRACETORCH_TOKEN")));
  if (options.token.empty()) {
    if (const std::string file = Env("TRACETORCH_TOKEN_FILE"); !file.empty()) {
      absl::StatusOr<std::string> data = ReadFile(file, "token file");
      if (!data.ok()) return data.status();
      absl::string_view line(*data);
      if (const size_t nl = line.find('\n'); nl != absl::string_view::npos) {
        line = line.substr(0, nl);
      }
      line = absl::StripAsciiWhitespace(line);
      if (line.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("token file ", file, " (TRACETORCH_TOKEN_FILE): empty first line"));
      }
      options.token = std::string(line);
    }
  }
  options.tls_ca_file = Env("TRACETORCH_TLS_CA");
  options.tls_cert_file = Env("TRACETORCH_TLS_CERT");
  options.tls_key_file = Env("TRACETORCH_TLS_KEY");
  options.tls_server_name = Env("TRACETORCH_TLS_SERVER_NAME");
  // Named files must be readable now, so that a typo is reported before any call.
  const std::pair<const std::string*, const char*> files[] = {
      {&options.tls_ca_file, "TLS CA (TRACETORCH_TLS_CA)"},
      {&options.tls_cert_file, "TLS client certificate (TRACETORCH_TLS_CERT)"},
      {&options.tls_key_file, "TLS client key (TRACETORCH_TLS_KEY)"},
  };
  for (const auto& [path, what] : files) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> pem = ReadPem(*path, what);
    if (!pem.ok()) return pem.status();
  }
  return options;
}

}  // namespace tracetorch::service_client
