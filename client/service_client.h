// A blocking client of tracetorchd's TraceService (service.proto) for tools: the CLI's `sessions`
// and `snapshot` commands, tests, scripts. Every call carries a deadline.
//
// Errors are absl::Status with the gRPC code mapped one-to-one (NotFound for an unknown session,
// Unavailable when the daemon is not running, DeadlineExceeded, Unimplemented for Watch/Diff).
//
// Thread-safe: calls may be made from several threads at once.
//
// Example:
//   auto client = TraceServiceClient::Connect(DefaultServiceAddress());
//   absl::StatusOr<v1::Snapshot> snap = (*client)->GetSnapshot("latest");
//   TraceRecord record = FromProto(snap->record());  // client/record_proto.h
#ifndef TRACETORCH_CLIENT_SERVICE_CLIENT_H_
#define TRACETORCH_CLIENT_SERVICE_CLIENT_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::client {

// $TRACETORCH_DAEMON_RPC when set; else $XDG_RUNTIME_DIR/tracetorch/tracetorchd-rpc.sock when
// XDG_RUNTIME_DIR is set; else /run/tracetorch/tracetorchd-rpc.sock.
std::string DefaultServiceAddress();

class TraceServiceClient {
 public:
  // `address`: a socket path, "unix:PATH", "unix://PATH", or "HOST:PORT" for a daemon configured
  // with a TCP listener. Does not connect yet (the first call does). InvalidArgument when empty.
  static absl::StatusOr<std::unique_ptr<TraceServiceClient>> Create(
      std::string_view address, absl::Duration deadline = absl::Seconds(5));
  ~TraceServiceClient();

  absl::StatusOr<v1::ListSessionsResponse> ListSessions(std::string_view job_id = "");
  // `session_id` may be "latest".
  absl::StatusOr<v1::Snapshot> GetSnapshot(std::string_view session_id);
  absl::StatusOr<v1::DaemonStats> GetStats();

 private:
  class Impl;
  explicit TraceServiceClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tracetorch::client

#endif  // TRACETORCH_CLIENT_SERVICE_CLIENT_H_
