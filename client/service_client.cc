#include "client/service_client.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "tracetorch/v1/service.grpc.pb.h"

namespace tracetorch::client {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("tracetorchd: ", s.error_message()));
}

}  // namespace

std::string DefaultServiceAddress() {
  if (const char* env = std::getenv("TRACETORCH_DAEMON_RPC"); env != nullptr && *env != '\0') {
    return env;
  }
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg != '\0') {
    return absl::StrCat(xdg, "/tracetorch/tracetorchd-rpc.sock");
  }
  return "/run/tracetorch/tracetorchd-rpc.sock";
}

class TraceServiceClient::Impl {
 public:
  Impl(std::shared_ptr<grpc::Channel> channel, absl::Duration deadline)
      : stub_(v1::TraceService::NewStub(channel)), deadline_(deadline) {}

  template <typename Request, typename Response, typename Method>
  absl::StatusOr<Response> Call(Method method, const Request& request) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
    Response response;
    grpc::Status s = ((*stub_).*method)(&context, request, &response);
    if (!s.ok()) return FromGrpc(s);
    return response;
  }

  std::unique_ptr<v1::TraceService::Stub> stub_;
  const absl::Duration deadline_;
};

absl::StatusOr<std::unique_ptr<TraceServiceClient>> TraceServiceClient::Create(
    std::string_view address_in, absl::Duration deadline) {
  const absl::string_view address(address_in.data(), address_in.size());
  if (address.empty()) return absl::InvalidArgumentError("empty tracetorchd service address");
  std::string target;
  if (absl::StartsWith(address, "unix:")) {
    target = std::string(address);
  } else if (absl::StartsWith(address, "/") || absl::StartsWith(address, ".")) {
    target = absl::StrCat("unix:", address);
  } else {
    target = std::string(address);  // HOST:PORT
  }
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  return std::unique_ptr<TraceServiceClient>(
      new TraceServiceClient(std::make_unique<Impl>(std::move(channel), deadline)));
}

TraceServiceClient::TraceServiceClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TraceServiceClient::~TraceServiceClient() = default;

absl::StatusOr<v1::ListSessionsResponse> TraceServiceClient::ListSessions(std::string_view job_id) {
  v1::ListSessionsRequest request;
  request.set_job_id(std::string(job_id));
  return impl_->Call<v1::ListSessionsRequest, v1::ListSessionsResponse>(
      &v1::TraceService::Stub::ListSessions, request);
}

absl::StatusOr<v1::Snapshot> TraceServiceClient::GetSnapshot(std::string_view session_id) {
  v1::GetSnapshotRequest request;
  request.mutable_session()->set_session_id(std::string(session_id));
  return impl_->Call<v1::GetSnapshotRequest, v1::Snapshot>(&v1::TraceService::Stub::GetSnapshot,
                                                           request);
}

absl::StatusOr<v1::DaemonStats> TraceServiceClient::GetStats() {
  return impl_->Call<v1::GetStatsRequest, v1::DaemonStats>(&v1::TraceService::Stub::GetStats,
                                                           v1::GetStatsRequest());
}

}  // namespace tracetorch::client
