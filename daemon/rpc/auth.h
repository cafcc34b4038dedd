// Remote access to the TraceService over TCP. Off unless an address is configured; when on:
//
//  - a bearer token is required on every call ("authorization: Bearer TOKEN"; otherwise the call
//    fails with UNAUTHENTICATED before any method runs). The token comes from a file (first line,
//    surrounding whitespace trimmed); it is compared in constant time. A TCP listener without a
//    token is refused.
//  - TLS when a server certificate and key are given (PEM files); with a client CA, clients must
//    present a certificate signed by it (requested and verified during the handshake).
//  - loopback only unless an address is given: a bare port "7171" means 127.0.0.1:7171. A
//    listener on a non-loopback address without TLS is refused (the token would cross the network
//    in clear text).
//
// How it is enforced: the token check is a grpc::AuthMetadataProcessor attached to the TCP
// listener's server credentials only, so the Unix socket (guarded by file permissions) stays
// token-free and the service methods never see an unauthenticated call. gRPC 1.51's
// InsecureServerCredentials cannot carry a processor (SetAuthMetadataProcessor aborts), so the
// loopback listener without TLS uses LocalServerCredentials(LOCAL_TCP) instead: no bytes change on
// the wire (plain HTTP/2, plain-text clients connect as before), the server's auth filter runs,
// and connections from non-loopback peers are refused on top of binding to loopback.
//
// Thread-safe: BearerTokenProcessor is called from gRPC threads; the rest are pure functions.
#ifndef TRACETORCH_DAEMON_RPC_AUTH_H_
#define TRACETORCH_DAEMON_RPC_AUTH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/security/server_credentials.h"

namespace tracetorch::daemon {

struct TcpListenerOptions {
  std::string address;             // "HOST:PORT", "[V6]:PORT", or a bare "PORT" (loopback).
  std::string token_file;          // Required.
  std::string tls_cert_file;       // Server certificate chain (PEM). With tls_key_file: TLS.
  std::string tls_key_file;        // Its private key (PEM).
  std::string tls_client_ca_file;  // Clients must present a certificate signed by this CA (PEM).
};

// "7171" -> "127.0.0.1:7171"; "HOST:PORT" and "[V6]:PORT" are kept. Port 0 picks a free port.
// InvalidArgument for an empty host, a port that is not a number in [0, 65535], or bad brackets.
absl::StatusOr<std::string> NormalizeTcpAddress(std::string_view address);

// Whether a normalised "HOST:PORT" listens on loopback only: "localhost", 127.0.0.0/8, "::1".
// Anything else (0.0.0.0, "::", host names, other addresses) is not.
bool IsLoopbackAddress(std::string_view host_port);

// Equality that takes the same time wherever the first difference is (it depends on the lengths
// only), so a caller cannot find the token byte by byte by timing rejections.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

struct TokenFile {
  std::string token;
  bool group_or_world_accessible = false;  // Mode has any of 077: warn (0600 recommended).
};

// Reads the token: the file's first line, surrounding whitespace trimmed. NotFound when missing,
// PermissionDenied when unreadable, InvalidArgument (naming the file) when not a regular file,
// empty, longer than 4096 bytes, or holding characters other than printable ASCII.
absl::StatusOr<TokenFile> ReadTokenFile(const std::string& path);

// Checks "authorization: Bearer TOKEN" on every call of the listener it is attached to; counts
// rejections.
class BearerTokenProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit BearerTokenProcessor(std::string token) : token_(std::move(token)) {}

  // Cheap and non-blocking: runs on gRPC's thread, not a separate pool.
  bool IsBlocking() const override { return false; }
  // UNAUTHENTICATED when the header is missing, not a Bearer credential, or the wrong token; the
  // header is consumed (methods do not see it) on success.
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

  uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }

 private:
  const std::string token_;
  std::atomic<uint64_t> rejected_{0};
};

// Everything needed to add the TCP listener to a grpc::ServerBuilder.
struct TcpListener {
  std::string address;  // Normalised.
  bool tls = false;
  bool client_certificates = false;                      // Clients must present a certificate.
  std::shared_ptr<grpc::ServerCredentials> credentials;  // With `processor` attached.
  std::shared_ptr<BearerTokenProcessor> processor;
  std::vector<std::string> warnings;  // For the log (a token file others can read, ...).
};

// The checks that need no file: InvalidArgument for a malformed address, no token file, half a
// certificate/key pair, a client CA without TLS, or a non-loopback address without TLS.
absl::Status ValidateTcpListenerOptions(const TcpListenerOptions& options);

// Validates, reads the token and PEM files (NotFound/PermissionDenied/InvalidArgument naming the
// file) and builds the credentials.
absl::StatusOr<TcpListener> MakeTcpListener(const TcpListenerOptions& options);

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_RPC_AUTH_H_
