// Placeholder until TLS lands: insecure credentials only.
#include "client/credentials.h"

#include "grpcpp/grpcpp.h"

namespace tracetorch::client {

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ServiceClientOptions& /*options*/) {
  return grpc::InsecureChannelCredentials();
}

grpc::ChannelArguments MakeChannelArguments(const ServiceClientOptions& /*options*/) {
  return grpc::ChannelArguments();
}

absl::StatusOr<ServiceClientOptions> ServiceClientOptionsFromEnv() {
  return ServiceClientOptions();
}

}  // namespace tracetorch::client
