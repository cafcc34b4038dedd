#include "cli/command_io.h"

#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace tracetorch::cli {
namespace {

TEST(Fail, OneLineOnStderrAndExit2) {
  std::ostringstream out;
  std::ostringstream err;
  const CliEnvironment env{.out = &out, .err = &err, .wait = {}};
  EXPECT_EQ(Fail(env, "bad\r\nthing\nhere\r"), kExitUsage);
  EXPECT_EQ(err.str(), "tracetorch: bad thing here \n");
  EXPECT_EQ(out.str(), "");
}

TEST(PrintLine, EndsWithOneNewline) {
  std::ostringstream out;
  std::ostringstream err;
  const CliEnvironment env{.out = &out, .err = &err, .wait = {}};
  PrintLine("a", env);
  PrintLine("b\n", env);
  PrintLine("", env);
  EXPECT_EQ(out.str(), "a\nb\n\n");
}

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

TEST(ConnectToDaemon, AnEmptyAddressIsInvalid) {
  EXPECT_EQ(ConnectToDaemon("", absl::Seconds(5)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::cli
