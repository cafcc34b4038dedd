// Channel credentials for the TraceService client: TLS from PEM files when a CA is given,
// insecure otherwise (Unix sockets, loopback TCP without TLS).
#ifndef TRACETORCH_SERVICE_CLIENT_CREDENTIALS_H_
#define TRACETORCH_SERVICE_CLIENT_CREDENTIALS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "service_client/service_client.h"

namespace tracetorch::service_client {

// InvalidArgument/NotFound (naming the file) when a PEM file cannot be read or a client
// certificate is given without its key (or the reverse).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ServiceClientOptions& options);

// Channel arguments for the options (the TLS target-name override).
grpc::ChannelArguments MakeChannelArguments(const ServiceClientOptions& options);

}  // namespace tracetorch::service_client

#endif  // TRACETORCH_SERVICE_CLIENT_CREDENTIALS_H_
