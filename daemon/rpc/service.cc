#include "daemon/rpc/service.h"

#include <string>
#include <utility>
#include <vector>

#include "daemon/core/diff_service.h"
#include "protocol/service_errors.h"

namespace tracetorch::daemon {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::Status ToGrpcStatus(grpc::CallbackServerContext* context, const absl::Status& status) {
  if (!status.ok()) {
    context->AddTrailingMetadata(protocol::kDaemonErrorTrailer, protocol::kDaemonErrorTrailerValue);
  }
  return ToGrpcStatus(status);
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
    reactor->Finish(ToGrpcStatus(
        context, absl::InvalidArgumentError("GetSnapshot needs a session id or \"latest\"")));
    return reactor;
  }
  absl::StatusOr<v1::Snapshot> snapshot = deps_.manager->GetSnapshot(ref);
  if (snapshot.ok()) *response = *std::move(snapshot);
  reactor->Finish(ToGrpcStatus(context, snapshot.status()));
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

// ---- Diff and named baselines: DiffService (daemon/core/diff_service.h) does the work ----------

grpc::ServerUnaryReactor* TraceServiceImpl::Diff(grpc::CallbackServerContext* context,
                                                 const v1::DiffRequest* request,
                                                 v1::DiffResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<v1::DiffResponse> diff = deps_.diff->Diff(*request);
  if (diff.ok()) *response = *std::move(diff);
  reactor->Finish(ToGrpcStatus(context, diff.status()));
  return reactor;
}

grpc::ServerUnaryReactor* TraceServiceImpl::SetBaseline(grpc::CallbackServerContext* context,
                                                        const v1::SetBaselineRequest* request,
                                                        v1::BaselineInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<v1::BaselineInfo> info = deps_.diff->SetBaseline(*request);
  if (info.ok()) *response = *std::move(info);
  reactor->Finish(ToGrpcStatus(context, info.status()));
  return reactor;
}

grpc::ServerUnaryReactor* TraceServiceImpl::ListBaselines(
    grpc::CallbackServerContext* context, const v1::ListBaselinesRequest* /*request*/,
    v1::ListBaselinesResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<std::vector<v1::BaselineInfo>> list = deps_.diff->ListBaselines();
  if (list.ok()) {
    for (v1::BaselineInfo& info : *list) *response->add_baselines() = std::move(info);
  }
  reactor->Finish(ToGrpcStatus(context, list.status()));
  return reactor;
}

grpc::ServerUnaryReactor* TraceServiceImpl::RemoveBaseline(
    grpc::CallbackServerContext* context, const v1::RemoveBaselineRequest* request,
    v1::RemoveBaselineResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(context, deps_.diff->RemoveBaseline(request->name())));
  return reactor;
}

}  // namespace tracetorch::daemon
