// A blocking client of tracetorchd's TraceService (service.proto) for tools: the CLI's `sessions`,
// `snapshot`, `diff --remote`, `baseline` and `watch --remote` commands, tests, scripts. Every
// unary call carries a deadline; a Watch stream has none (it is cancelled instead).
//
// Errors are absl::Status with the gRPC code mapped one-to-one (NotFound for an unknown session,
// Unavailable when the daemon is not running, DeadlineExceeded, Unauthenticated for a missing or
// wrong token) and the message prefixed with "tracetorchd: ".
//
// Thread-safe: calls may be made from several threads at once.
//
// Example:
//   absl::StatusOr<std::unique_ptr<TraceServiceClient>> client =
//       TraceServiceClient::Create(protocol::DefaultServiceAddress());  // protocol/address.h
//   if (!client.ok()) return client.status();
//   absl::StatusOr<v1::Snapshot> snap = (*client)->GetSnapshot("latest");
//   if (!snap.ok()) return snap.status();
//   TraceRecord record = FromProto(snap->record());  // protocol/record_proto.h
#ifndef TRACETORCH_SERVICE_CLIENT_SERVICE_CLIENT_H_
#define TRACETORCH_SERVICE_CLIENT_SERVICE_CLIENT_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::service_client {

class WatchStream;  // service_client/watch_stream.h

// How to call the daemon. The credentials are for a TCP listener: a Unix socket needs none (file
// permissions guard it), and Create ignores the TLS settings for one (the token is still sent).
struct ServiceClientOptions {
  absl::Duration deadline = absl::Seconds(5);  // Per unary call.
  // Sent on every call as "authorization: Bearer TOKEN" when non-empty.
  std::string token;
  // TLS when non-empty: the server certificate is checked against this CA bundle (PEM file).
  std::string tls_ca_file;
  // Client certificate and key (PEM files) for a daemon that checks client certificates.
  std::string tls_cert_file;
  std::string tls_key_file;
  // The name the server certificate must carry when it differs from the address's host.
  std::string tls_server_name;
};

// Options from the environment, for tools: $TRACETORCH_TOKEN, else the first line of the file
// named by $TRACETORCH_TOKEN_FILE; $TRACETORCH_TLS_CA, $TRACETORCH_TLS_CERT, $TRACETORCH_TLS_KEY,
// $TRACETORCH_TLS_SERVER_NAME. NotFound when a named file does not exist; InvalidArgument when it
// cannot be read, is not PEM (TLS files), or the token file's first line is empty.
absl::StatusOr<ServiceClientOptions> ServiceClientOptionsFromEnv();

// True for an error of a unary call that the daemon itself answered (it is reachable: its store is
// away, the session is unknown, ...), false for one that never reached it (nothing listens, the
// deadline passed on the way).
bool AnsweredByDaemon(const absl::Status& status);

class TraceServiceClient {
 public:
  // `address`: a Unix socket path (one that starts with '/' or '.', or has no ':' at all, like
  // "tracetorchd-rpc.sock"), "unix:PATH", "unix://PATH", or "HOST:PORT" (any other gRPC target)
  // for a daemon configured with a TCP listener. Does not connect yet (the first call does).
  // InvalidArgument when empty.
  static absl::StatusOr<std::unique_ptr<TraceServiceClient>> Create(
      std::string_view address, absl::Duration deadline = absl::Seconds(5));
  // As above with TLS and a token. InvalidArgument/NotFound when a TLS file cannot be read, or
  // for TLS options that do not go together (credentials.h).
  static absl::StatusOr<std::unique_ptr<TraceServiceClient>> Create(
      std::string_view address, const ServiceClientOptions& options);
  ~TraceServiceClient();

  absl::StatusOr<v1::ListSessionsResponse> ListSessions(std::string_view job_id = "");
  // `session_id` may be "latest".
  absl::StatusOr<v1::Snapshot> GetSnapshot(std::string_view session_id);
  absl::StatusOr<v1::DaemonStats> GetStats();
  // A session's forensic bundles; with `now`, one more taken now from a live session's flight
  // recorder. UNIMPLEMENTED from a daemon older than the flight recorder.
  absl::StatusOr<v1::ForensicsResponse> GetForensics(std::string_view session_id, bool now);
  // Every rank of `job_id` the daemon knows (with a fleet store: every daemon's).
  absl::StatusOr<v1::JobResponse> GetJob(std::string_view job_id);

  absl::StatusOr<v1::DiffResponse> Diff(const v1::DiffRequest& request);
  absl::StatusOr<v1::BaselineInfo> SetBaseline(std::string_view name,
                                               const v1::DiffOperand& source);
  absl::StatusOr<v1::ListBaselinesResponse> ListBaselines();
  absl::Status RemoveBaseline(std::string_view name);

  // Opens a Watch stream (service_client/watch_stream.h). Never fails here: connection and request
  // errors are reported by the stream. The client must outlive the stream (it uses its channel).
  std::unique_ptr<WatchStream> Watch(const v1::WatchRequest& request);

  class Impl;  // service_client/service_client_internal.h

 private:
  explicit TraceServiceClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tracetorch::service_client

#endif  // TRACETORCH_SERVICE_CLIENT_SERVICE_CLIENT_H_
