// TraceServiceClient without a daemon: how addresses become gRPC targets, and what Create
// refuses. (Calls against a real tracetorchd: daemon/server and cli/remote_diff_test.cc.)
#include "service_client/service_client.h"

#include "gtest/gtest.h"
#include "service_client/service_client_internal.h"

namespace tracetorch::service_client {
namespace {

TEST(GrpcTarget, SocketPathsBecomeUnixTargets) {
  EXPECT_EQ(GrpcTarget("/run/tracetorch/tracetorchd-rpc.sock"),
            "unix:/run/tracetorch/tracetorchd-rpc.sock");
  EXPECT_EQ(GrpcTarget("./rpc.sock"), "unix:./rpc.sock");
  EXPECT_EQ(GrpcTarget("rpc.sock"), "unix:rpc.sock");  // No ':' at all: a path.
  EXPECT_EQ(GrpcTarget("run/rpc.sock"), "unix:run/rpc.sock");
  EXPECT_EQ(GrpcTarget("unix:/tmp/x"), "unix:/tmp/x");
  EXPECT_EQ(GrpcTarget("unix:///tmp/x"), "unix:///tmp/x");
}

TEST(GrpcTarget, HostAndPortStayAsTheyAre) {
  EXPECT_EQ(GrpcTarget("localhost:7070"), "localhost:7070");
  EXPECT_EQ(GrpcTarget("10.0.0.1:7070"), "10.0.0.1:7070");
  EXPECT_EQ(GrpcTarget("[::1]:7070"), "[::1]:7070");
  EXPECT_EQ(GrpcTarget("dns:///box:7070"), "dns:///box:7070");
}

TEST(TraceServiceClient, CreateRefusesAnEmptyAddress) {
  EXPECT_EQ(TraceServiceClient::Create("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TraceServiceClient, CreateRefusesTlsOptionsThatDoNotGoTogether) {
  ServiceClientOptions options;
  options.tls_cert_file = "/nonexistent/cert.pem";  // A certificate without its key.
  EXPECT_EQ(TraceServiceClient::Create("box:7070", options).status().code(),
            absl::StatusCode::kInvalidArgument);
  // For a Unix socket the TLS settings are ignored.
  EXPECT_TRUE(TraceServiceClient::Create("/tmp/rpc.sock", options).ok());
}

TEST(TraceServiceClient, CallsToNoDaemonAreUnavailable) {
  auto client = TraceServiceClient::Create("/nonexistent-dir/rpc.sock", absl::Seconds(5));
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::StatusOr<v1::ListSessionsResponse> list = (*client)->ListSessions();
  EXPECT_EQ(list.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(AnsweredByDaemon(list.status()));  // Nobody answered.
  EXPECT_EQ(std::string(list.status().message()).rfind("tracetorchd: ", 0), 0u) << list.status();
}

}  // namespace
}  // namespace tracetorch::service_client
