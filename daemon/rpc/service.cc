#include "daemon/rpc/service.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/diff_service.h"
#include "daemon/core/worker_pool.h"
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
//
// On the store pool, never on gRPC's thread: a baseline store may block (a PostgreSQL server that
// is away costs its connect timeout), and gRPC's callback threads serve every other call.

grpc::ServerUnaryReactor* TraceServiceImpl::OnStorePool(grpc::CallbackServerContext* context,
                                                        std::function<absl::Status()> call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // `context` and `reactor` live until Finish; the task finishes the call exactly once.
  absl::Status posted =
      deps_.store_pool->Post([context, reactor, call = std::move(call)](bool cancelled) {
        if (cancelled) {
          reactor->Finish(ToGrpcStatus(context, absl::UnavailableError("tracetorchd is stopping")));
        } else if (context->IsCancelled()) {
          reactor->Finish(grpc::Status::CANCELLED);  // The caller has gone: nothing to do.
        } else {
          reactor->Finish(ToGrpcStatus(context, call()));
        }
      });
  if (!posted.ok()) {
    reactor->Finish(ToGrpcStatus(
        context, posted.code() == absl::StatusCode::kResourceExhausted
                     ? absl::ResourceExhaustedError(absl::StrCat(
                           "tracetorchd is busy with diffs and baselines: ", posted.message(),
                           " (try again)"))
                     : absl::UnavailableError("tracetorchd is stopping")));
  }
  return reactor;
}

grpc::ServerUnaryReactor* TraceServiceImpl::Diff(grpc::CallbackServerContext* context,
                                                 const v1::DiffRequest* request,
                                                 v1::DiffResponse* response) {
  return OnStorePool(context, [this, request, response] {
    absl::StatusOr<v1::DiffResponse> diff = deps_.diff->Diff(*request);
    if (diff.ok()) *response = *std::move(diff);
    return diff.status();
  });
}

grpc::ServerUnaryReactor* TraceServiceImpl::SetBaseline(grpc::CallbackServerContext* context,
                                                        const v1::SetBaselineRequest* request,
                                                        v1::BaselineInfo* response) {
  return OnStorePool(context, [this, request, response] {
    absl::StatusOr<v1::BaselineInfo> info = deps_.diff->SetBaseline(*request);
    if (info.ok()) *response = *std::move(info);
    return info.status();
  });
}

grpc::ServerUnaryReactor* TraceServiceImpl::ListBaselines(
    grpc::CallbackServerContext* context, const v1::ListBaselinesRequest* /*request*/,
    v1::ListBaselinesResponse* response) {
  return OnStorePool(context, [this, response] {
    absl::StatusOr<std::vector<v1::BaselineInfo>> list = deps_.diff->ListBaselines();
    if (list.ok()) {
      for (v1::BaselineInfo& info : *list) *response->add_baselines() = std::move(info);
    }
    return list.status();
  });
}

grpc::ServerUnaryReactor* TraceServiceImpl::RemoveBaseline(
    grpc::CallbackServerContext* context, const v1::RemoveBaselineRequest* request,
    v1::RemoveBaselineResponse* /*response*/) {
  return OnStorePool(context,
                     [this, request] { return deps_.diff->RemoveBaseline(request->name()); });
}

}  // namespace tracetorch::daemon
