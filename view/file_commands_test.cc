#include "view/file_commands.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trace/json.h"
#include "view/render.h"
#include "view/source.h"

namespace tracetorch::view {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Fixture(const std::string& name) {
  return std::string(TRACETORCH_FIXTURES_DIR) + "/upstream/" + name;
}

// A command's output and the environment it printed into.
struct Captured {
  std::ostringstream out;
  std::ostringstream err;
  CliEnvironment env{.out = &out, .err = &err, .wait = {}};
};

TEST(RunInspect, PrintsTheRenderedViewOrTheFilteredJson) {
  const absl::StatusOr<TraceRecord> record = LoadTraceFile(Fixture("train_trace.json"));
  ASSERT_TRUE(record.ok()) << record.status();
  const LayerFilter linear{.type = "Linear"};

  Captured text;
  EXPECT_EQ(
      RunInspect({.file = Fixture("train_trace.json"), .filter = linear}, Style::Plain(), text.env),
      kExitOk);
  EXPECT_EQ(text.out.str(), RenderInspect(*record, linear, Style::Plain()));
  EXPECT_EQ(text.err.str(), "");

  Captured json;
  EXPECT_EQ(RunInspect({.file = Fixture("train_trace.json"), .filter = linear, .json = true},
                       Style::Plain(), json.env),
            kExitOk);
  EXPECT_EQ(json.out.str(), TraceToJson(ApplyFilter(*record, linear)) + "\n");
}

TEST(RunInspect, BadFilterAndMissingFileAreOneLineUsageErrors) {
  Captured bad;
  EXPECT_EQ(RunInspect({.file = Fixture("train_trace.json"), .filter = {.min_latency_ms = -1.0}},
                       Style::Plain(), bad.env),
            kExitUsage);
  EXPECT_THAT(bad.err.str(), StartsWith("tracetorch: --min-latency must be"));
  EXPECT_EQ(bad.out.str(), "");

  Captured missing;
  EXPECT_EQ(RunInspect({.file = "nope.json"}, Style::Plain(), missing.env), kExitUsage);
  EXPECT_EQ(missing.err.str(), "tracetorch: nope.json: file not found\n");
}

TEST(RunSummary, PrintsTheSummaryPanel) {
  const absl::StatusOr<TraceRecord> record = LoadTraceFile(Fixture("train_trace.json"));
  ASSERT_TRUE(record.ok()) << record.status();
  Captured c;
  EXPECT_EQ(RunSummary({.file = Fixture("train_trace.json")}, Style::Plain(), c.env), kExitOk);
  EXPECT_EQ(c.out.str(), RenderSummary(*record, Style::Plain()));
}

TEST(RunDiff, ExitCodeSaysWhetherSomethingRegressed) {
  Captured same;
  EXPECT_EQ(
      RunDiff({.baseline = Fixture("train_trace.json"), .current = Fixture("train_trace.json")},
              Style::Plain(), same.env),
      kExitOk);
  Captured perturbed;
  EXPECT_EQ(RunDiff({.baseline = Fixture("train_trace.json"),
                     .current = Fixture("train_trace_perturbed.json"),
                     .json = true},
                    Style::Plain(), perturbed.env),
            kExitRegressions);
  EXPECT_THAT(perturbed.out.str(), StartsWith("{"));

  Captured one;
  EXPECT_EQ(RunDiff({.baseline = Fixture("train_trace.json")}, Style::Plain(), one.env),
            kExitUsage);
  EXPECT_THAT(one.err.str(), HasSubstr("diff needs two traces"));

  Captured negative;
  EXPECT_EQ(RunDiff({.baseline = Fixture("train_trace.json"),
                     .current = Fixture("train_trace.json"),
                     .thresholds = {.latency = -1}},
                    Style::Plain(), negative.env),
            kExitUsage);
  EXPECT_THAT(negative.err.str(), StartsWith("tracetorch: invalid diff thresholds"));
}

TEST(CompareTraceFiles, GivesWhatRunDiffPrintsWithoutPrintingIt) {
  Captured c;
  const absl::StatusOr<ComparedTraces> compared =
      CompareTraceFiles({.baseline = Fixture("train_trace.json"),
                         .current = Fixture("train_trace_perturbed.json")},
                        c.env);
  ASSERT_TRUE(compared.ok()) << compared.status();
  EXPECT_EQ(c.out.str(), "");
  EXPECT_TRUE(compared->diff.has_regressions());
  const absl::StatusOr<TraceRecord> current = LoadTraceFile(Fixture("train_trace_perturbed.json"));
  ASSERT_TRUE(current.ok()) << current.status();
  EXPECT_EQ(compared->current.layers.size(), current->layers.size());

  Captured printed;
  EXPECT_EQ(RunDiff({.baseline = Fixture("train_trace.json"),
                     .current = Fixture("train_trace_perturbed.json")},
                    Style::Plain(), printed.env),
            kExitRegressions);
  Captured reported;
  EXPECT_EQ(ReportDiff(compared->diff, /*json=*/false, Style::Plain(), reported.env),
            kExitRegressions);
  EXPECT_EQ(reported.out.str(), printed.out.str());
}

TEST(CompareTraceFiles, ErrorsAreTheLinesRunDiffFailsWith) {
  Captured c;
  const absl::StatusOr<ComparedTraces> one =
      CompareTraceFiles({.baseline = Fixture("train_trace.json")}, c.env);
  EXPECT_EQ(one.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(one.status().message()), HasSubstr("diff needs two traces"));
  const absl::StatusOr<ComparedTraces> negative =
      CompareTraceFiles({.baseline = Fixture("train_trace.json"),
                         .current = Fixture("train_trace.json"),
                         .thresholds = {.latency = -1}},
                        c.env);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(negative.status().message()), StartsWith("invalid diff thresholds"));
  const absl::StatusOr<ComparedTraces> missing =
      CompareTraceFiles({.baseline = "nope.json", .current = Fixture("train_trace.json")}, c.env);
  EXPECT_EQ(missing.status().message(), "nope.json: file not found");
  EXPECT_EQ(c.out.str(), "");
}

TEST(RunWatchFile, DrawsUntilTheWaiterSaysStop) {
  Captured c;
  std::vector<absl::Duration> waits;
  c.env.wait = [&waits](absl::Duration d) {
    waits.push_back(d);
    return waits.size() < 2;
  };
  EXPECT_EQ(RunWatchFile({.file = Fixture("train_trace.json"), .interval_s = 0.25}, Style::Plain(),
                         c.env),
            kExitOk);
  EXPECT_EQ(waits, (std::vector<absl::Duration>{absl::Milliseconds(250), absl::Milliseconds(250)}));
  EXPECT_THAT(c.out.str(), HasSubstr("train_trace.json"));
  EXPECT_THAT(c.out.str(), HasSubstr("Stopped watching."));
}

TEST(RunWatchFile, IntervalOutsideItsRangeIsAUsageError) {
  for (double interval : {0.0, -1.0, 86401.0}) {
    Captured c;
    c.env.wait = [](absl::Duration) { return false; };
    EXPECT_EQ(RunWatchFile({.file = "x.json", .interval_s = interval}, Style::Plain(), c.env),
              kExitUsage)
        << interval;
    EXPECT_THAT(c.err.str(), StartsWith("tracetorch: --interval must be a number of seconds"));
  }
  EXPECT_TRUE(ValidateWatchInterval(86400).ok());
  EXPECT_EQ(ValidateWatchInterval(0).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::view
