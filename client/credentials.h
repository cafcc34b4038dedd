// Channel credentials for the TraceService client: TLS from PEM files when a CA is given,
// insecure otherwise (Unix sockets, loopback TCP without TLS).
#ifndef TRACETORCH_CLIENT_CREDENTIALS_H_
#define TRACETORCH_CLIENT_CREDENTIALS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "client/service_client.h"
#include "grpcpp/security/credentials.h"

namespace tracetorch::client {

// InvalidArgument/NotFound (naming the file) when a PEM file cannot be read or a client
// certificate is given without its key (or the reverse).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ServiceClientOptions& options);

// Channel arguments for the options (the TLS target-name override).
grpc::ChannelArguments MakeChannelArguments(const ServiceClientOptions& options);

}  // namespace tracetorch::client

#endif  // TRACETORCH_CLIENT_CREDENTIALS_H_
