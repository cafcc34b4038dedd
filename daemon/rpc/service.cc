#include "daemon/rpc/service.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/diff_service.h"
#include "daemon/core/fleet_registry.h"
#include "daemon/core/flight_monitor.h"
#include "daemon/core/worker_pool.h"
#include "protocol/service_errors.h"
#include "protocol/session_info_proto.h"

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
  for (const protocol::SessionInfo& info : deps_.manager->List(request->job_id())) {
    protocol::ToProto(info, response->add_sessions());
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
  absl::StatusOr<protocol::Snapshot> snapshot = deps_.manager->GetSnapshot(ref);
  if (snapshot.ok()) protocol::ToProto(*snapshot, response);
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

grpc::ServerUnaryReactor* TraceServiceImpl::GetForensics(grpc::CallbackServerContext* context,
                                                         const v1::GetForensicsRequest* request,
                                                         v1::ForensicsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string& ref = request->session().session_id();
  if (ref.empty()) {
    reactor->Finish(ToGrpcStatus(
        context, absl::InvalidArgumentError("GetForensics needs a session id or \"latest\"")));
    return reactor;
  }
  absl::StatusOr<SessionManager::Found> found = deps_.manager->Find(ref);
  if (!found.ok()) {
    reactor->Finish(ToGrpcStatus(context, found.status()));
    return reactor;
  }
  response->set_session_id(found->id);
  if (deps_.flight != nullptr) {
    absl::StatusOr<std::vector<std::string>> bundles =
        deps_.flight->Bundles(found->id, request->now());
    if (!bundles.ok()) {
      reactor->Finish(ToGrpcStatus(context, bundles.status()));
      return reactor;
    }
    for (const std::string& bytes : *bundles) {
      if (!response->add_bundles()->ParseFromString(bytes))
        response->mutable_bundles()->RemoveLast();
    }
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* TraceServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                   const v1::GetJobRequest* request,
                                                   v1::JobResponse* response) {
  if (request->job_id().empty()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(context, absl::InvalidArgumentError("GetJob needs a job id")));
    return reactor;
  }
  response->set_job_id(request->job_id());
  if (deps_.fleet == nullptr) {
    response->set_source("this daemon");
    for (const protocol::SessionInfo& info : deps_.manager->List(request->job_id())) {
      protocol::ToProto(info, response->add_ranks()->mutable_session());
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  return OnStorePool(context, [this, request, response]() -> absl::Status {
    absl::StatusOr<std::vector<FleetRank>> ranks = deps_.fleet->Job(request->job_id());
    if (!ranks.ok()) return ranks.status();
    response->set_source(deps_.fleet->Describe());
    for (const FleetRank& r : *ranks) {
      v1::JobRank* out = response->add_ranks();
      out->set_daemon(r.daemon);
      out->set_seen_unix_ns(absl::ToUnixNanos(r.seen));
      if (!out->mutable_session()->ParseFromString(r.session_info)) {
        response->mutable_ranks()->RemoveLast();
      }
    }
    return absl::OkStatus();
  });
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
