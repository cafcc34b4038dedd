#include "service_client/service_client.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "protocol/service_errors.h"
#include "service_client/credentials.h"
#include "service_client/service_client_internal.h"
#include "tracetorch/v1/service.grpc.pb.h"

namespace tracetorch::service_client {

namespace {
constexpr absl::string_view kAnsweredPayload = "type.tracetorch.dev/answered-by-daemon";
}  // namespace

absl::Status FromGrpc(const grpc::Status& s, const grpc::ClientContext* context) {
  if (s.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(s.error_code()),
                   absl::StrCat("tracetorchd: ", s.error_message()));
  if (context != nullptr) {
    const auto& trailers = context->GetServerTrailingMetadata();
    auto it = trailers.find(protocol::kDaemonErrorTrailer);
    if (it != trailers.end() && it->second == protocol::kDaemonErrorTrailerValue) {
      out.SetPayload(kAnsweredPayload, absl::Cord(protocol::kDaemonErrorTrailerValue));
    }
  }
  return out;
}

bool AnsweredByDaemon(const absl::Status& status) {
  return status.GetPayload(kAnsweredPayload).has_value();
}

std::string GrpcTarget(std::string_view address_in) {
  const absl::string_view address(address_in.data(), address_in.size());
  if (absl::StartsWith(address, "unix:")) return std::string(address);
  if (absl::StartsWith(address, "/") || absl::StartsWith(address, ".") ||
      !absl::StrContains(address, ':')) {
    return absl::StrCat("unix:", address);
  }
  return std::string(address);  // HOST:PORT, or another gRPC target.
}

absl::StatusOr<std::unique_ptr<TraceServiceClient>> TraceServiceClient::Create(
    std::string_view address, absl::Duration deadline) {
  ServiceClientOptions options;
  options.deadline = deadline;
  return Create(address, options);
}

absl::StatusOr<std::unique_ptr<TraceServiceClient>> TraceServiceClient::Create(
    std::string_view address, const ServiceClientOptions& options) {
  if (address.empty()) return absl::InvalidArgumentError("empty tracetorchd service address");
  const std::string target = GrpcTarget(address);
  // TLS is for TCP: a Unix socket is plain (file permissions guard it), so TLS settings taken from
  // the environment do not break local use.
  ServiceClientOptions effective = options;
  if (absl::StartsWith(target, "unix:")) {
    effective.tls_ca_file.clear();
    effective.tls_cert_file.clear();
    effective.tls_key_file.clear();
    effective.tls_server_name.clear();
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(effective);
  if (!credentials.ok()) return credentials.status();
  auto channel = grpc::CreateCustomChannel(target, *credentials, MakeChannelArguments(effective));
  return std::unique_ptr<TraceServiceClient>(
      new TraceServiceClient(std::make_unique<Impl>(std::move(channel), effective)));
}

TraceServiceClient::TraceServiceClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TraceServiceClient::~TraceServiceClient() = default;

absl::StatusOr<v1::ListSessionsResponse> TraceServiceClient::ListSessions(std::string_view job_id) {
  v1::ListSessionsRequest request;
  request.set_job_id(std::string(job_id));
  return impl_->Call<v1::ListSessionsRequest, v1::ListSessionsResponse>(
      &v1::TraceService::Stub::ListSessions, request);
}

absl::StatusOr<v1::ForensicsResponse> TraceServiceClient::GetForensics(std::string_view session_id,
                                                                       bool now) {
  v1::GetForensicsRequest request;
  request.mutable_session()->set_session_id(std::string(session_id));
  request.set_now(now);
  return impl_->Call<v1::GetForensicsRequest, v1::ForensicsResponse>(
      &v1::TraceService::Stub::GetForensics, request);
}

absl::StatusOr<v1::JobResponse> TraceServiceClient::GetJob(std::string_view job_id) {
  v1::GetJobRequest request;
  request.set_job_id(std::string(job_id));
  return impl_->Call<v1::GetJobRequest, v1::JobResponse>(&v1::TraceService::Stub::GetJob, request);
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

absl::StatusOr<v1::DiffResponse> TraceServiceClient::Diff(const v1::DiffRequest& request) {
  return impl_->Call<v1::DiffRequest, v1::DiffResponse>(&v1::TraceService::Stub::Diff, request);
}

absl::StatusOr<v1::BaselineInfo> TraceServiceClient::SetBaseline(std::string_view name,
                                                                 const v1::DiffOperand& source) {
  v1::SetBaselineRequest request;
  request.set_name(std::string(name));
  *request.mutable_source() = source;
  return impl_->Call<v1::SetBaselineRequest, v1::BaselineInfo>(&v1::TraceService::Stub::SetBaseline,
                                                               request);
}

absl::StatusOr<v1::ListBaselinesResponse> TraceServiceClient::ListBaselines() {
  return impl_->Call<v1::ListBaselinesRequest, v1::ListBaselinesResponse>(
      &v1::TraceService::Stub::ListBaselines, v1::ListBaselinesRequest());
}

absl::Status TraceServiceClient::RemoveBaseline(std::string_view name) {
  v1::RemoveBaselineRequest request;
  request.set_name(std::string(name));
  return impl_
      ->Call<v1::RemoveBaselineRequest, v1::RemoveBaselineResponse>(
          &v1::TraceService::Stub::RemoveBaseline, request)
      .status();
}

}  // namespace tracetorch::service_client
