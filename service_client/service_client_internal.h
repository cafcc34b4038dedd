// Private to service_client/: the TraceServiceClient's state, shared by service_client.cc (unary
// calls) and watch_stream.cc (the Watch stream). Not installed; tools include service_client.h.
#ifndef TRACETORCH_SERVICE_CLIENT_SERVICE_CLIENT_INTERNAL_H_
#define TRACETORCH_SERVICE_CLIENT_SERVICE_CLIENT_INTERNAL_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "service_client/service_client.h"
#include "tracetorch/v1/service.grpc.pb.h"

namespace tracetorch::service_client {

// grpc::Status -> absl::Status, the message prefixed with "tracetorchd: ". With the call's
// `context`, an error the daemon answered (protocol/service_errors.h) gets the payload that
// AnsweredByDaemon() looks for.
absl::Status FromGrpc(const grpc::Status& status, const grpc::ClientContext* context = nullptr);

// The gRPC target for an address as TraceServiceClient::Create takes it: "unix:PATH" for a socket
// path, the address itself otherwise ("unix:...", "HOST:PORT"). REQUIRES: `address` non-empty.
std::string GrpcTarget(std::string_view address);

class TraceServiceClient::Impl {
 public:
  Impl(std::shared_ptr<grpc::Channel> channel, ServiceClientOptions options)
      : channel_(channel),
        stub_(v1::TraceService::NewStub(channel)),
        options_(std::move(options)) {}

  // Adds the token (if any) to a call's metadata.
  void Authorize(grpc::ClientContext* context) const {
    if (!options_.token.empty()) {
      context->AddMetadata("authorization", "Bearer " + options_.token);
    }
  }

  template <typename Request, typename Response, typename Method>
  absl::StatusOr<Response> Call(Method method, const Request& request) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.deadline));
    Authorize(&context);
    Response response;
    grpc::Status s = ((*stub_).*method)(&context, request, &response);
    if (!s.ok()) return FromGrpc(s, &context);
    return response;
  }

  v1::TraceService::Stub& stub() { return *stub_; }
  const ServiceClientOptions& options() const { return options_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::TraceService::Stub> stub_;
  const ServiceClientOptions options_;
};

}  // namespace tracetorch::service_client

#endif  // TRACETORCH_SERVICE_CLIENT_SERVICE_CLIENT_INTERNAL_H_
