// The gRPC TraceService for viewers and tools: a thin adapter over SessionManager (callback API;
// every reaction finishes at once and never blocks on I/O beyond reading a snapshot file).
// ListSessions, GetSnapshot and GetStats are served; Watch and Diff answer UNIMPLEMENTED for now.
//
// Thread-safe.
#ifndef TRACETORCH_DAEMON_SERVICE_H_
#define TRACETORCH_DAEMON_SERVICE_H_

#include <functional>

#include "absl/status/status.h"
#include "daemon/counters.h"
#include "daemon/session_manager.h"
#include "grpcpp/grpcpp.h"
#include "tracetorch/v1/service.grpc.pb.h"

namespace tracetorch::daemon {

// The one place absl::Status becomes grpc::Status (codes are numerically identical).
grpc::Status ToGrpcStatus(const absl::Status& status);

class TraceServiceImpl final : public v1::TraceService::CallbackService {
 public:
  // `stats` fills a DaemonStats (the daemon adds process figures and the event rate).
  TraceServiceImpl(SessionManager* manager, std::function<v1::DaemonStats()> stats)
      : manager_(manager), stats_(std::move(stats)) {}

  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* context,
                                         const v1::ListSessionsRequest* request,
                                         v1::ListSessionsResponse* response) override;
  grpc::ServerUnaryReactor* GetSnapshot(grpc::CallbackServerContext* context,
                                        const v1::GetSnapshotRequest* request,
                                        v1::Snapshot* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const v1::GetStatsRequest* request,
                                     v1::DaemonStats* response) override;

 private:
  SessionManager* const manager_;
  const std::function<v1::DaemonStats()> stats_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_SERVICE_H_
