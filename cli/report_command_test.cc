#include "cli/report_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/test_util.h"
#include "report/tensorboard/testing/event_reader.h"
#include "trace/atomic_file.h"

namespace tracetorch::cli {

using ::tracetorch::view::CliEnvironment;
using ::tracetorch::view::kExitOk;
using ::tracetorch::view::kExitRegressions;
namespace {

using test_util::ExpectOneLineError;
using test_util::Fixture;
using test_util::RunCli;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Temp(const std::string& name) { return ::testing::TempDir() + "/report_cmd_" + name; }

TEST(ReportCommand, WritesOneSelfContainedPage) {
  const std::string out = Temp("trace.html");
  const test_util::CliResult r = RunCli({"report", Fixture("train_trace.json"), "-o", out});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("11 layers, no per-step history"));
  absl::StatusOr<std::string> html = ReadFileToString(out);
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_THAT(*html, StartsWith("<!DOCTYPE html>"));
  EXPECT_THAT(*html, HasSubstr("\"kind\":\"trace\""));
  EXPECT_THAT(*html, HasSubstr("blocks.0.fc"));
  EXPECT_THAT(*html, HasSubstr("Chart.js v3"));
}

TEST(ReportCommand, DiffHtmlKeepsTheTextAndTheExitCode) {
  const std::string out = Temp("diff.html");
  const test_util::CliResult r = RunCli(
      {"diff", Fixture("train_trace.json"), Fixture("train_trace_perturbed.json"), "--html", out});
  EXPECT_EQ(r.code, kExitRegressions) << r.err;
  EXPECT_THAT(r.out, HasSubstr("regressions detected"));
  EXPECT_THAT(r.err, HasSubstr("HTML report written to " + out));
  absl::StatusOr<std::string> html = ReadFileToString(out);
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_THAT(*html, HasSubstr("\"exit_status\":1"));
  // --json stays pure JSON on stdout.
  const test_util::CliResult j = RunCli(
      {"diff", Fixture("train_trace.json"), Fixture("train_trace.json"), "--json", "--html", out});
  EXPECT_EQ(j.code, kExitOk) << j.err;
  EXPECT_THAT(j.out, StartsWith("{"));
}

TEST(ReportCommand, ExportWritesEveryListedScalarToTheEventFile) {
  const std::string dir = Temp("tb");
  std::filesystem::remove_all(dir);
  const test_util::CliResult r =
      RunCli({"export", "--tensorboard", dir, Fixture("train_trace.json"), "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"tag\":\"layers/blocks.0.fc/latency_ms\""));
  const std::vector<std::string> files = tensorboard::testing::EventFiles(dir);
  ASSERT_EQ(files.size(), 1u);
  absl::StatusOr<std::vector<tensorboard::testing::ReadEvent>> events =
      tensorboard::testing::ReadEventFile(files[0]);
  ASSERT_TRUE(events.ok()) << events.status();
  size_t scalars = 0;
  for (const auto& e : *events) scalars += e.value.has_value() ? 1 : 0;
  size_t listed = 0;
  for (size_t at = r.out.find("\"tag\""); at != std::string::npos;
       at = r.out.find("\"tag\"", at + 1)) {
    ++listed;
  }
  EXPECT_EQ(scalars, listed);
  EXPECT_GT(scalars, 11u * 4u);

  const test_util::CliResult plain =
      RunCli({"export", "--tensorboard", dir, Fixture("train_trace.json")});
  ASSERT_EQ(plain.code, kExitOk) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("tensorboard --logdir " + dir));
  EXPECT_EQ(tensorboard::testing::EventFiles(dir).size(), 2u);  // A new file each time.
}

TEST(ReportCommand, BadInputIsOneLineExit2) {
  ExpectOneLineError(RunCli({"report", "nope.json", "-o", Temp("x.html")}));
  ExpectOneLineError(RunCli({"report", Fixture("train_trace.json"), "-o", "/nonexistent/x.html"}));
  ExpectOneLineError(RunCli({"report", "-o", Temp("x.html")}));
  ExpectOneLineError(RunCli({"export", Fixture("train_trace.json")}));  // --tensorboard required.
  ExpectOneLineError(RunCli({"report", "--remote", "baseline:main", "-o", Temp("x.html")}));
  ExpectOneLineError(
      RunCli({"export", "--tensorboard", "/proc/nope", Fixture("train_trace.json")}));
}

TEST(ReportCommand, ARemoteSourceNeedsTheDaemonClient) {
  std::ostringstream out, err;
  const CliEnvironment env{
      .out = &out, .err = &err, .stdout_is_tty = false, .no_color = false, .wait = {}};
  const char* argv[] = {"tracetorch", "report", "--remote", "latest", "-o", "x.html"};
  EXPECT_EQ(RunTracetorchCommand(6, argv, env, nullptr), kNeedsDaemonClient);
  EXPECT_EQ(out.str() + err.str(), "");
}

}  // namespace
}  // namespace tracetorch::cli
