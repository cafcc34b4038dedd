#include "daemon/service.h"

#include <string>
#include <utility>

namespace tracetorch::daemon {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::ServerUnaryReactor* TraceServiceImpl::ListSessions(grpc::CallbackServerContext* context,
                                                         const v1::ListSessionsRequest* request,
                                                         v1::ListSessionsResponse* response) {
  for (v1::SessionInfo& info : deps_.manager->List(request->job_id())) {
    *response->add_sessions() = std::move(info);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* TraceServiceImpl::GetSnapshot(grpc::CallbackServerContext* context,
                                                        const v1::GetSnapshotRequest* request,
                                                        v1::Snapshot* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string& ref = request->session().session_id();
  if (ref.empty()) {
    reactor->Finish(
        ToGrpcStatus(absl::InvalidArgumentError("GetSnapshot needs a session id or \"latest\"")));
    return reactor;
  }
  absl::StatusOr<v1::Snapshot> snapshot = deps_.manager->GetSnapshot(ref);
  if (snapshot.ok()) *response = *std::move(snapshot);
  reactor->Finish(ToGrpcStatus(snapshot.status()));
  return reactor;
}

grpc::ServerUnaryReactor* TraceServiceImpl::GetStats(grpc::CallbackServerContext* context,
                                                     const v1::GetStatsRequest* /*request*/,
                                                     v1::DaemonStats* response) {
  *response = deps_.stats();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace tracetorch::daemon
