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

TEST(DefaultServiceAddress, IsBesideTheAgentSocket) {
  unsetenv("TRACETORCH_DAEMON_RPC");
  setenv("TRACETORCH_DAEMON", "/tmp/tt-test/d.sock", 1);
  EXPECT_EQ(DefaultServiceAddress(), "/tmp/tt-test/tracetorchd-rpc.sock");
  setenv("TRACETORCH_DAEMON", "unix:///tmp/tt-test2/x.sock", 1);
  EXPECT_EQ(DefaultServiceAddress(), "/tmp/tt-test2/tracetorchd-rpc.sock");
  setenv("TRACETORCH_DAEMON_RPC", "/tmp/elsewhere/rpc.sock", 1);
  EXPECT_EQ(DefaultServiceAddress(), "/tmp/elsewhere/rpc.sock");
  unsetenv("TRACETORCH_DAEMON_RPC");
  unsetenv("TRACETORCH_DAEMON");
}

TEST(ServiceAddressFor, TakesTheAgentsSocketToTheServiceSocketBesideIt) {
  EXPECT_EQ(ServiceAddressFor("/run/tracetorch/tracetorchd.sock"),
            "/run/tracetorch/tracetorchd-rpc.sock");
  EXPECT_EQ(ServiceAddressFor("unix:///run/tracetorch/tracetorchd.sock"),
            "/run/tracetorch/tracetorchd-rpc.sock");
  EXPECT_EQ(ServiceAddressFor("unix:d/tracetorchd.sock"), "d/tracetorchd-rpc.sock");
  EXPECT_EQ(ServiceAddressFor("tracetorchd.sock"), "./tracetorchd-rpc.sock");
  // Anything else is called as given: a service socket, another name, TCP.
  for (const char* kept :
       {"/run/tracetorch/tracetorchd-rpc.sock", "/tmp/rpc.sock", "unix:/tmp/rpc.sock", "host:7171",
        "dns:///h:7171", "/tmp/tracetorchd.sock.old", "/tmp/tracetorchd.sock/x"}) {
    EXPECT_EQ(ServiceAddressFor(kept), kept);
  }
}

TEST(DescribeServiceAddress, NamesBothSocketsForTheAgentsSocket) {
  EXPECT_EQ(DescribeServiceAddress("/d/tracetorchd.sock"),
            "/d/tracetorchd-rpc.sock (the service socket beside the agents' socket "
            "/d/tracetorchd.sock)");
  EXPECT_EQ(DescribeServiceAddress("/d/rpc.sock"), "/d/rpc.sock");
  EXPECT_EQ(DescribeServiceAddress("h:1"), "h:1");
}

}  // namespace
}  // namespace tracetorch::protocol
