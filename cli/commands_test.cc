#include "cli/commands.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "cli/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch::cli {

using ::tracetorch::view::kExitOk;
using ::tracetorch::view::kExitRegressions;
using ::tracetorch::view::kExitUsage;
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using test_util::CliResult;
using test_util::Fixture;
using test_util::RunCli;

int LineCount(const std::string& text) {
  return static_cast<int>(
      std::vector<std::string>(absl::StrSplit(text, '\n', absl::SkipEmpty())).size());
}

TEST(RunTracetorch, NoSubcommandPrintsUsageAndExits2) {
  const CliResult r = RunCli({});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("inspect"));
  EXPECT_THAT(r.err, HasSubstr("diff"));
  EXPECT_EQ(r.out, "");
}

TEST(RunTracetorch, Version) {
  const CliResult r = RunCli({"--version"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_THAT(r.out, StartsWith("tracetorch "));
}

TEST(RunTracetorch, HelpExits0) {
  const CliResult r = RunCli({"diff", "--help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_THAT(r.out, HasSubstr("--latency-threshold"));
}

TEST(RunTracetorch, UsageErrorsAreOneLineExit2) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"diff", "a.json"},
           {"inspect"},
           {"frobnicate"},
           {"inspect", "x.json", "--min-latency", "abc"},
           {"--color=sometimes", "inspect", "x.json"},
       }) {
    const CliResult r = RunCli(args);
    EXPECT_EQ(r.code, kExitUsage) << args[0];
    EXPECT_THAT(r.err, StartsWith("tracetorch: ")) << r.err;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
  }
}

TEST(RunTracetorch, MissingFile) {
  const CliResult r = RunCli({"inspect", "nope.json"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "tracetorch: nope.json: file not found\n");
  EXPECT_EQ(r.out, "");
}

TEST(RunTracetorch, InvalidFilterValue) {
  const CliResult r = RunCli({"inspect", Fixture("train_trace.json"), "--min-latency", "-1"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, StartsWith("tracetorch: --min-latency must be"));
}

TEST(RunTracetorch, InvalidThresholds) {
  const CliResult r = RunCli({"diff", Fixture("train_trace.json"), Fixture("train_trace.json"),
                              "--latency-threshold", "-0.5"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, StartsWith("tracetorch: invalid diff thresholds: "));
  EXPECT_EQ(LineCount(r.err), 1);
}

TEST(RunTracetorch, InspectPlainAndRich) {
  const CliResult plain = RunCli({"inspect", Fixture("train_trace.json")});
  EXPECT_EQ(plain.code, kExitOk) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("+-- blocks (Sequential)"));
  EXPECT_THAT(plain.out, Not(HasSubstr("\x1b")));

  const CliResult rich = RunCli({"inspect", Fixture("train_trace.json")}, {.stdout_is_tty = true});
  EXPECT_THAT(rich.out, HasSubstr("├── "));
  EXPECT_THAT(rich.out, HasSubstr("\x1b["));

  const CliResult no_color =
      RunCli({"inspect", Fixture("train_trace.json")}, {.stdout_is_tty = true, .no_color = true});
  EXPECT_EQ(no_color.out, plain.out);

  const CliResult forced = RunCli({"inspect", Fixture("train_trace.json"), "--color", "always"});
  EXPECT_EQ(forced.out, rich.out);
}

TEST(RunTracetorch, DiffExitCodes) {
  EXPECT_EQ(RunCli({"diff", Fixture("train_trace.json"), Fixture("train_trace.json")}).code,
            kExitOk);
  const CliResult r =
      RunCli({"diff", Fixture("train_trace.json"), Fixture("train_trace_perturbed.json")});
  EXPECT_EQ(r.code, kExitRegressions);
  EXPECT_THAT(r.out, HasSubstr("Warnings    26"));
}

TEST(RunTracetorch, WatchReturnsZeroWhenStopped) {
  const CliResult r = RunCli({"watch", Fixture("train_trace.json"), "--interval", "0.1"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_THAT(r.out, HasSubstr("Watching "));
  EXPECT_THAT(r.out, HasSubstr("\\-- head (Linear)"));
}

TEST(RunTracetorch, WatchRejectsBadInterval) {
  const CliResult r = RunCli({"watch", "x.json", "--interval", "0"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, StartsWith("tracetorch: --interval must be"));
}

}  // namespace
}  // namespace tracetorch::cli
