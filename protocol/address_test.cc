#include "protocol/address.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace tracetorch::protocol {
namespace {

TEST(ParseDaemonAddress, AcceptsPathsAndUnixUrls) {
  EXPECT_EQ(*ParseDaemonAddress("/run/x.sock"), "/run/x.sock");
  EXPECT_EQ(*ParseDaemonAddress("unix:///run/x.sock"), "/run/x.sock");
  EXPECT_EQ(*ParseDaemonAddress("unix:/run/x.sock"), "/run/x.sock");
  EXPECT_EQ(*ParseDaemonAddress("rel.sock"), "rel.sock");
  EXPECT_EQ(ParseDaemonAddress("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDaemonAddress("unix://").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDaemonAddress("tcp://127.0.0.1:1").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDaemonAddress("/" + std::string(200, 'a')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DefaultDaemonAddress, PrefersTheEnvironment) {
  setenv("TRACETORCH_DAEMON", "unix:///tmp/custom.sock", 1);
  EXPECT_EQ(DefaultDaemonAddress(), "unix:///tmp/custom.sock");
  unsetenv("TRACETORCH_DAEMON");
  setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
  EXPECT_EQ(DefaultDaemonAddress(), "/run/user/1000/tracetorch/tracetorchd.sock");
  unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(DefaultDaemonAddress(), "/run/tracetorch/tracetorchd.sock");
}

TEST(ServiceSocketBeside, TakesTheIngestSocketsFolder) {
  EXPECT_EQ(ServiceSocketBeside("/run/tracetorch/tracetorchd.sock"),
            "/run/tracetorch/tracetorchd-rpc.sock");
  EXPECT_EQ(ServiceSocketBeside("/x.sock"), "/tracetorchd-rpc.sock");
  EXPECT_EQ(ServiceSocketBeside("d.sock"), "./tracetorchd-rpc.sock");
  EXPECT_EQ(ServiceSocketBeside("a/b/d.sock"), "a/b/tracetorchd-rpc.sock");
}

TEST(DefaultServiceAddress, IsTheAgentsSocketUnlessTheServiceIsNamed) {
  unsetenv("TRACETORCH_DAEMON_RPC");
  unsetenv("TRACETORCH_DAEMON");
  unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(DefaultServiceAddress(), "/run/tracetorch/tracetorchd.sock");
  EXPECT_EQ(DefaultServiceAddressSource(), "");
  setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
  EXPECT_EQ(DefaultServiceAddress(), "/run/user/7/tracetorch/tracetorchd.sock");
  EXPECT_EQ(DefaultServiceAddressSource(), "$XDG_RUNTIME_DIR");
  setenv("TRACETORCH_DAEMON", "/tmp/tt-test/d.sock", 1);
  EXPECT_EQ(DefaultServiceAddress(), "/tmp/tt-test/d.sock");
  EXPECT_EQ(DefaultServiceAddressSource(), "$TRACETORCH_DAEMON");
  setenv("TRACETORCH_DAEMON_RPC", "/tmp/elsewhere/rpc.sock", 1);
  EXPECT_EQ(DefaultServiceAddress(), "/tmp/elsewhere/rpc.sock");
  EXPECT_EQ(DefaultServiceAddressSource(), "$TRACETORCH_DAEMON_RPC");
  unsetenv("TRACETORCH_DAEMON_RPC");
  unsetenv("TRACETORCH_DAEMON");
  unsetenv("XDG_RUNTIME_DIR");
}

}  // namespace
}  // namespace tracetorch::protocol
