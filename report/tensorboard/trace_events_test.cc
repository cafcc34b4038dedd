#include "report/tensorboard/trace_events.h"

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch::tensorboard {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TraceRecord Record() {
  TraceRecord r;
  r.metadata.model_name = "Net";
  LayerTrace fc;
  fc.full_name = "blocks.0.fc";
  fc.name = "fc";
  fc.type = "Linear";
  fc.forward_count = 10;
  fc.latency_ms = 0.25;
  fc.grad_norm = 1.5;
  TensorInfo out;
  out.stats = TensorStats{
      .mean = 0.0, .std = 0.75, .min = -1.0, .max = 1.0, .nan_count = 3, .inf_count = 1};
  fc.outputs.push_back(out);
  fc.has_nan = true;
  r.layers.push_back(fc);
  LayerTrace evil;
  evil.full_name = "<script>alert(1)</script>|x";
  evil.type = "Evil";
  evil.forward_count = 4;
  r.layers.push_back(evil);
  r.warnings.push_back(Anomaly{.type = AnomalyType::kDeadLayer,
                               .severity = AnomalySeverity::kWarning,
                               .layer = evil.full_name,
                               .message = "dead *bold*",
                               .details = {}});
  r.warnings.push_back(Anomaly{.type = AnomalyType::kNanActivation,
                               .severity = AnomalySeverity::kCritical,
                               .layer = "blocks.0.fc",
                               .message = "NaN in output",
                               .details = {}});
  r.metadata.nan_origin = NanOrigin{.layer = "blocks.0.fc", .step = 7};
  return r;
}

class TraceEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/trace_events_test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    EventFileOptions o;
    o.wall_time = 100.0;
    auto w = EventFileWriter::Create(dir_, o);
    ASSERT_TRUE(w.ok()) << w.status();
    writer_ = std::move(*w);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // tag -> step -> value of what was written.
  std::map<std::string, std::map<int64_t, double>> Export(const TraceRecord& r,
                                                          const StepHistory& h) {
    std::map<std::string, std::map<int64_t, double>> out;
    absl::StatusOr<ExportCounts> counts = WriteTraceEvents(
        r, h, writer_.get(),
        [&out](const WrittenScalar& s) { out[std::string(s.tag)][s.step] = s.value; });
    EXPECT_TRUE(counts.ok()) << counts.status();
    if (counts.ok()) {
      size_t n = 0;
      for (const auto& [tag, points] : out) n += points.size();
      EXPECT_EQ(counts->scalars, n);
      last_step_ = counts->last_step;
    }
    return out;
  }

  std::string dir_;
  std::unique_ptr<EventFileWriter> writer_;
  int64_t last_step_ = -1;
};

TEST_F(TraceEventsTest, WithoutHistoryEachLayerOnceAtTheLastStep) {
  auto got = Export(Record(), StepHistory{});
  EXPECT_EQ(last_step_, 9);  // The most forwards (10) minus one.
  EXPECT_EQ(got["layers/blocks.0.fc/latency_ms"], (std::map<int64_t, double>{{9, 0.25}}));
  EXPECT_EQ(got["layers/blocks.0.fc/activation_std"], (std::map<int64_t, double>{{9, 0.75}}));
  EXPECT_EQ(got["layers/blocks.0.fc/grad_norm"], (std::map<int64_t, double>{{9, 1.5}}));
  EXPECT_EQ(got["layers/blocks.0.fc/non_finite"], (std::map<int64_t, double>{{9, 1.0}}));
  EXPECT_EQ(got["layers/blocks.0.fc/nan_count"], (std::map<int64_t, double>{{9, 3.0}}));
  EXPECT_EQ(got["layers/blocks.0.fc/inf_count"], (std::map<int64_t, double>{{9, 1.0}}));
  // Not measured: nothing written (no latency, std or gradient for the second layer).
  EXPECT_EQ(got.count("layers/<script>alert(1)</script>|x/latency_ms"), 0u);
  EXPECT_EQ(got["layers/<script>alert(1)</script>|x/non_finite"],
            (std::map<int64_t, double>{{9, 0.0}}));
}

TEST_F(TraceEventsTest, WithHistoryEveryStepItHolds) {
  StepHistory h;
  LayerSteps& l = h.layers.emplace_back();
  l.full_name = "blocks.0.fc";
  l.steps = {0, 2, 4};
  l.latency_ms = {0.5, std::nan(""), 0.125};
  l.output_std = {1.0, 2.0, 3.0};
  l.grad_norm = {0.1, 0.2};  // Shorter: the last step has none.
  l.non_finite = {false, true};
  auto got = Export(Record(), h);
  EXPECT_EQ(last_step_, 4);
  EXPECT_EQ(got["layers/blocks.0.fc/latency_ms"],
            (std::map<int64_t, double>{{0, 0.5}, {4, 0.125}}));
  EXPECT_EQ(got["layers/blocks.0.fc/activation_std"],
            (std::map<int64_t, double>{{0, 1.0}, {2, 2.0}, {4, 3.0}}));
  EXPECT_EQ(got["layers/blocks.0.fc/grad_norm"], (std::map<int64_t, double>{{0, 0.1}, {2, 0.2}}));
  EXPECT_EQ(got["layers/blocks.0.fc/non_finite"],
            (std::map<int64_t, double>{{0, 0.0}, {2, 1.0}, {4, 0.0}}));
  EXPECT_EQ(got["layers/blocks.0.fc/nan_count"], (std::map<int64_t, double>{{4, 3.0}}));

  // A live exporter's increment: from index 1 on.
  std::map<std::string, std::map<int64_t, double>> more;
  absl::StatusOr<uint64_t> n = WriteLayerSteps(
      l, 1, 3, writer_.get(),
      [&more](const WrittenScalar& s) { more[std::string(s.tag)][s.step] = s.value; });
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 6u);  // Step 2: std, grad, non_finite; step 4: latency, std, non_finite.
  EXPECT_EQ(more["layers/blocks.0.fc/activation_std"],
            (std::map<int64_t, double>{{2, 2.0}, {4, 3.0}}));
}

TEST(AnomaliesMarkdown, OriginFirstAndTraceTextEscaped) {
  const std::string md = AnomaliesMarkdown(Record());
  EXPECT_THAT(md, HasSubstr("**NaN origin:** blocks.0.fc at step 7"));
  // The origin's anomaly leads the table although it was recorded second.
  EXPECT_LT(md.find("NaN in output"), md.find("dead"));
  EXPECT_THAT(md, Not(HasSubstr("<script>")));
  EXPECT_THAT(md, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;\\|x"));
  EXPECT_THAT(md, HasSubstr("dead \\*bold\\*"));
  EXPECT_EQ(AnomaliesMarkdown(TraceRecord{}), "No anomalies.\n");
}

}  // namespace
}  // namespace tracetorch::tensorboard
