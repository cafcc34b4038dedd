// `tracetorch sessions` and `tracetorch snapshot` without a daemon: one clear line and exit 2.
// The commands against a real tracetorchd are tested end to end in
// agent/python/tests/test_daemon_stream.py.
#include <stdlib.h>

#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch::cli {

using ::tracetorch::view::kExitUsage;
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using test_util::CliResult;
using test_util::ExpectOneLineError;
using test_util::RunCli;

std::string MissingSocket() {
  return ::testing::TempDir() + "/no-such-dir-tracetorch/tracetorchd-rpc.sock";
}

TEST(RemoteCommands, SessionsWithoutDaemonIsOneLineAndExit2) {
  const CliResult r = RunCli({"sessions", "--remote", MissingSocket()});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, StartsWith("tracetorch: cannot reach tracetorchd at "));
  EXPECT_THAT(r.err, EndsWith("\n"));
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

TEST(RemoteCommands, SnapshotWithoutDaemonIsOneLineAndExit2) {
  const CliResult r =
      RunCli({"snapshot", "latest", "--remote", MissingSocket(), "-o", "/dev/null"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("cannot reach tracetorchd"));
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

TEST(RemoteCommands, SnapshotNeedsASession) {
  const CliResult r = RunCli({"snapshot"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("session"));
}

}  // namespace
}  // namespace tracetorch::cli
