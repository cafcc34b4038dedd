#include "cli/daemon_connect.h"

#include <cstdlib>

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

TEST(DescribeRemoteError, TheDefaultAddressSaysWhereItCameFromAndHowToNameAnother) {
  unsetenv("TRACETORCH_DAEMON_RPC");
  unsetenv("TRACETORCH_DAEMON");
  unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(
      DescribeRemoteError(absl::UnavailableError("refused"), "/run/tracetorch/tracetorchd.sock"),
      "cannot reach tracetorchd at /run/tracetorch/tracetorchd.sock (the system default: no "
      "--remote, TRACETORCH_DAEMON and XDG_RUNTIME_DIR unset): refused; is tracetorchd "
      "running there? Name its socket with --remote SOCKET or TRACETORCH_DAEMON=SOCKET");
  setenv("TRACETORCH_DAEMON", "/tmp/tt/tracetorchd.sock", 1);
  EXPECT_EQ(DescribeRemoteError(absl::UnavailableError("refused"), "/tmp/tt/tracetorchd.sock"),
            "cannot reach tracetorchd at /tmp/tt/tracetorchd.sock (from $TRACETORCH_DAEMON): "
            "refused; is tracetorchd running there? Name its socket with --remote SOCKET or "
            "TRACETORCH_DAEMON=SOCKET");
  unsetenv("TRACETORCH_DAEMON");
}

TEST(ConnectToDaemon, AnEmptyAddressIsInvalid) {
  EXPECT_EQ(ConnectToDaemon("", absl::Seconds(5)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::cli
