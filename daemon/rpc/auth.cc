#include "daemon/rpc/auth.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/server_credentials.h"

namespace tracetorch::daemon {
namespace {

constexpr size_t kMaxTokenBytes = 4096;
constexpr size_t kMaxPemBytes = 1 << 20;

// Splits "HOST:PORT" / "[V6]:PORT"; the host without brackets.
bool SplitHostPort(absl::string_view address, absl::string_view* host, absl::string_view* port) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return false;
    }
    *host = address.substr(1, close - 1);
    *port = address.substr(close + 2);
    return true;
  }
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  // An IPv6 address needs brackets: "::1:7171" is ambiguous.
  return host->find(':') == absl::string_view::npos;
}

bool ValidPort(absl::string_view port) {
  if (port.empty() || port.size() > 5) return false;
  for (char c : port) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  int value = 0;
  return absl::SimpleAtoi(port, &value) && value >= 0 && value <= 65535;
}

absl::Status ErrnoStatus(int err, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InvalidArgumentError(message);
  }
}

// Reads a whole regular file of at most `limit` bytes; `mode` gets its permission bits.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t limit, mode_t* mode,
                                          const char* what) {
  const std::string name = absl::StrCat(what, " ", path);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return ErrnoStatus(errno, name);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, name);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(name, ": not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > limit) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": larger than ", limit, " bytes (", st.st_size, ")"));
  }
  if (mode != nullptr) *mode = st.st_mode;
  std::string data;
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      return ErrnoStatus(err, name);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > limit) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat(name, ": larger than ", limit, " bytes"));
    }
  }
  close(fd);
  return data;
}

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  absl::StatusOr<std::string> pem = ReadSmallFile(path, kMaxPemBytes, nullptr, what);
  if (!pem.ok()) return pem.status();
  if (!absl::StrContains(*pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": not a PEM file (no -----BEGIN line)"));
  }
  return pem;
}

}  // namespace

absl::StatusOr<std::string> NormalizeTcpAddress(std::string_view address_in) {
  const absl::string_view address =
      absl::StripAsciiWhitespace(absl::string_view(address_in.data(), address_in.size()));
  if (address.empty()) return absl::InvalidArgumentError("empty TCP address");
  if (ValidPort(address)) return absl::StrCat("127.0.0.1:", address);
  absl::string_view host, port;
  if (!SplitHostPort(address, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TCP address '", address, "' is not PORT, HOST:PORT or [IPV6]:PORT"));
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TCP address '", address, "' has no host (use 0.0.0.0 to listen on every interface)"));
  }
  if (!ValidPort(port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TCP address '", address, "': port '", port, "' is not in 0..65535"));
  }
  return std::string(address);
}

bool IsLoopbackAddress(std::string_view host_port) {
  absl::string_view host, port;
  if (!SplitHostPort(absl::string_view(host_port.data(), host_port.size()), &host, &port)) {
    return false;
  }
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  const std::string h(host);
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Walks `a` (the secret) in full whatever `b` holds; differences are OR-ed, never branched on.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    const unsigned char other = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(static_cast<unsigned char>(a[i]) ^ other);
  }
  return diff == 0;
}

absl::StatusOr<TokenFile> ReadTokenFile(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("no token file");
  mode_t mode = 0;
  absl::StatusOr<std::string> data = ReadSmallFile(path, 64 * 1024, &mode, "token file");
  if (!data.ok()) return data.status();
  absl::string_view line(*data);
  if (const size_t nl = line.find('\n'); nl != absl::string_view::npos) line = line.substr(0, nl);
  line = absl::StripAsciiWhitespace(line);
  if (line.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": empty first line"));
  }
  if (line.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path, ": token longer than ", kMaxTokenBytes, " bytes"));
  }
  for (char c : line) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token file ", path, ": the token may hold printable ASCII characters only"));
    }
  }
  TokenFile out;
  out.token = std::string(line);
  out.group_or_world_accessible = (mode & 077) != 0;
  return out;
}

grpc::Status BearerTokenProcessor::Process(const InputMetadata& auth_metadata,
                                           grpc::AuthContext* /*context*/,
                                           OutputMetadata* consumed_auth_metadata,
                                           OutputMetadata* /*response_metadata*/) {
  const auto it = auth_metadata.find("authorization");
  if (it == auth_metadata.end()) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "a bearer token is required (authorization: Bearer TOKEN; "
                        "tools read $TRACETORCH_TOKEN or $TRACETORCH_TOKEN_FILE)");
  }
  const absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kScheme = "bearer ";
  const bool bearer = value.size() > kScheme.size() && absl::StartsWithIgnoreCase(value, kScheme);
  const absl::string_view presented =
      bearer ? absl::StripAsciiWhitespace(value.substr(kScheme.size())) : absl::string_view();
  if (!bearer ||
      !ConstantTimeEquals(token_, std::string_view(presented.data(), presented.size()))) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "invalid bearer token");
  }
  consumed_auth_metadata->insert(
      {std::string(it->first.data(), it->first.size()), std::string(value)});
  return grpc::Status::OK;
}

absl::Status ValidateTcpListenerOptions(const TcpListenerOptions& o) {
  absl::StatusOr<std::string> address = NormalizeTcpAddress(o.address);
  if (!address.ok()) return address.status();
  if (o.token_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the TCP listener ", *address,
                     " needs a bearer token: --token-file FILE (one line; mode 0600 recommended)"));
  }
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate and its key (--tls-cert and --tls-key)");
  }
  const bool tls = !o.tls_cert_file.empty();
  if (!tls && !o.tls_client_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs TLS (--tls-cert and --tls-key): client certificates are checked "
        "during the TLS handshake");
  }
  if (!tls && !IsLoopbackAddress(*address)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to serve TraceService on ", *address,
        " without TLS: the token would cross the network in clear text. Give --tls-cert and "
        "--tls-key, or listen on loopback (e.g. --service-tcp 7171 for 127.0.0.1:7171)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TcpListener> MakeTcpListener(const TcpListenerOptions& o) {
  if (absl::Status s = ValidateTcpListenerOptions(o); !s.ok()) return s;
  TcpListener out;
  out.address = *NormalizeTcpAddress(o.address);

  absl::StatusOr<TokenFile> token = ReadTokenFile(o.token_file);
  if (!token.ok()) return token.status();
  if (token->group_or_world_accessible) {
    out.warnings.push_back(absl::StrCat("token file ", o.token_file,
                                        " can be read by other users (chmod 600 recommended)"));
  }
  if (token->token.size() < 16) {
    out.warnings.push_back(absl::StrCat("the token in ", o.token_file,
                                        " is shorter than 16 characters; use a random one "
                                        "(e.g. openssl rand -hex 32)"));
  }
  out.processor = std::make_shared<BearerTokenProcessor>(std::move(token->token));

  out.tls = !o.tls_cert_file.empty();
  if (out.tls) {
    absl::StatusOr<std::string> cert = ReadPem(o.tls_cert_file, "TLS certificate");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(o.tls_key_file, "TLS key");
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
    if (!o.tls_client_ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadPem(o.tls_client_ca_file, "TLS client CA");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *std::move(ca);
      ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
      out.client_certificates = true;
    } else {
      ssl.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
    }
    out.credentials = grpc::SslServerCredentials(ssl);
  } else {
    // Loopback without TLS (checked above); see the header for why not InsecureServerCredentials.
    out.credentials = grpc::experimental::LocalServerCredentials(LOCAL_TCP);
  }
  out.credentials->SetAuthMetadataProcessor(out.processor);
  return out;
}

}  // namespace tracetorch::daemon
