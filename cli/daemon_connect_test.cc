#include "cli/daemon_connect.h"

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tracetorch::cli {
namespace {

TEST(DescribeRemoteError, UnreachableDaemonNamesTheAddress) {
  EXPECT_EQ(
      DescribeRemoteError(absl::UnavailableError("tracetorchd: connection refused"), "/r.sock"),
      "cannot reach tracetorchd at /r.sock: tracetorchd: connection refused (is the daemon "
      "running? see --remote)");
  EXPECT_EQ(DescribeRemoteError(absl::DeadlineExceededError("slow"), "h:1"),
            "cannot reach tracetorchd at h:1: slow (is the daemon running? see --remote)");
  EXPECT_EQ(DescribeRemoteError(absl::NotFoundError("tracetorchd: unknown session 'x'"), "h:1"),
            "tracetorchd: unknown session 'x'");
}

TEST(DescribeRemoteError, NamesBothSocketsWhenGivenTheAgentsSocket) {
  EXPECT_EQ(DescribeRemoteError(absl::UnavailableError("refused"), "/d/tracetorchd.sock"),
            "cannot reach tracetorchd at /d/tracetorchd-rpc.sock (the service socket beside the "
            "agents' socket /d/tracetorchd.sock): refused (is the daemon running? see --remote)");
}

TEST(ConnectToDaemon, AnEmptyAddressIsInvalid) {
  EXPECT_EQ(ConnectToDaemon("", absl::Seconds(5)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::cli
