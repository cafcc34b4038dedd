#include "trace/divergence.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tracetorch {
namespace {

LayerTrace Layer(const std::string& name, std::optional<double> latency,
                 std::optional<double> grad_norm = std::nullopt) {
  LayerTrace l;
  l.name = name;
  l.full_name = name;
  l.type = "Linear";
  l.latency_ms_mean = latency;
  l.latency_ms = latency;
  l.forward_count = latency.has_value() ? 10 : 0;
  l.grad_norm = grad_norm;
  return l;
}

// One record per rank: layers "a", "b", "c" with latencies base * scale[rank] (layer a: 1 ms,
// b: 2 ms, c: 4 ms) and grad norm 1.0.
std::vector<TraceRecord> Records(const std::vector<double>& scales) {
  std::vector<TraceRecord> records;
  for (double s : scales) {
    TraceRecord r;
    r.layers = {Layer("a", 1.0 * s, 1.0), Layer("b", 2.0 * s, 1.0), Layer("c", 4.0 * s, 1.0)};
    records.push_back(r);
  }
  return records;
}

std::vector<RankTrace> Ranks(const std::vector<TraceRecord>& records) {
  std::vector<RankTrace> ranks;
  for (size_t i = 0; i < records.size(); ++i) {
    ranks.push_back({static_cast<int>(i), "", &records[i]});
  }
  return ranks;
}

int64_t RankOf(const Anomaly& a) { return std::get<int64_t>(*FindDetail(a.details, "rank")); }
std::string MetricOf(const Anomaly& a) {
  return std::get<std::string>(*FindDetail(a.details, "metric"));
}

TEST(DetectRankDivergence, OneSlowRankOfThreeIsFlaggedOnThatRankOnly) {
  const std::vector<TraceRecord> records = Records({1.0, 3.0, 1.05});
  const std::vector<Anomaly> found = DetectRankDivergence(Ranks(records));
  ASSERT_EQ(found.size(), 3u);
  const std::vector<std::string> layers = {"a", "b", "c"};
  for (size_t i = 0; i < found.size(); ++i) {
    const Anomaly& a = found[i];
    EXPECT_EQ(a.type, AnomalyType::kRankDivergence);
    EXPECT_EQ(a.severity, AnomalySeverity::kWarning);
    EXPECT_EQ(a.layer, layers[i]);  // In layer order.
    EXPECT_EQ(RankOf(a), 1);
    EXPECT_EQ(MetricOf(a), "latency_ms");
    EXPECT_TRUE(absl::StartsWith(a.message, "rank 1: forward latency")) << a.message;
    EXPECT_TRUE(absl::StrContains(a.message, "median")) << a.message;
  }
  // Layer b: rank 1 at 6 ms, the others at 2 and 2.1 ms (median 2.05).
  EXPECT_DOUBLE_EQ(std::get<double>(*FindDetail(found[1].details, "value")), 6.0);
  EXPECT_DOUBLE_EQ(std::get<double>(*FindDetail(found[1].details, "median")), 2.05);
  EXPECT_NEAR(std::get<double>(*FindDetail(found[1].details, "ratio")), 6.0 / 2.05, 1e-9);
}

TEST(DetectRankDivergence, ThreeTimesSlowerWithThreeRanksDoesNotFlagTheNormalRanks) {
  // A normal rank's others' median is (1 + 3.5) / 2 = 2.25: 0.56 away from it, over the 0.5
  // threshold, but the normal rank is at the median of all ranks.
  const std::vector<TraceRecord> records = Records({1.0, 1.0, 3.5});
  const std::vector<Anomaly> found = DetectRankDivergence(Ranks(records));
  ASSERT_EQ(found.size(), 3u);
  for (const Anomaly& a : found) EXPECT_EQ(RankOf(a), 2);
}

TEST(DetectRankDivergence, FastRankIsFlaggedToo) {
  const std::vector<TraceRecord> records = Records({1.0, 1.0, 1.0, 0.2});
  const std::vector<Anomaly> found = DetectRankDivergence(Ranks(records));
  ASSERT_EQ(found.size(), 3u);
  for (const Anomaly& a : found) EXPECT_EQ(RankOf(a), 3);
}

TEST(DetectRankDivergence, OfTwoRanksTheSlowerIsFlaggedAgainstTheFaster) {
  // The case: a two-rank job with one rank 14x slower.
  for (const std::vector<double>& scales :
       {std::vector<double>{1.0, 14.0}, std::vector<double>{14.0, 1.0}}) {
    const std::vector<TraceRecord> records = Records(scales);
    const int64_t slow = scales[0] > scales[1] ? 0 : 1;
    const std::vector<Anomaly> found = DetectRankDivergence(Ranks(records));
    ASSERT_EQ(found.size(), 3u);
    for (const Anomaly& a : found) {
      EXPECT_EQ(RankOf(a), slow);
      EXPECT_EQ(MetricOf(a), "latency_ms");
      EXPECT_DOUBLE_EQ(std::get<double>(*FindDetail(a.details, "ratio")), 14.0);
      EXPECT_EQ(std::get<int64_t>(*FindDetail(a.details, "ranks_compared")), 2);
      EXPECT_TRUE(absl::StrContains(a.message, "14.00x the other rank's")) << a.message;
    }
  }
}

TEST(DetectRankDivergence, OfTwoRanksWithinThresholdOrOneRankGiveNone) {
  EXPECT_TRUE(DetectRankDivergence(Ranks(Records({1.0, 1.4}))).empty());  // 0.4 < 0.5.
  EXPECT_TRUE(DetectRankDivergence(Ranks(Records({1.0}))).empty());
  EXPECT_TRUE(DetectRankDivergence({}).empty());
}

TEST(DetectRankDivergence, OfTwoRanksTheLargerGradNormIsFlagged) {
  std::vector<TraceRecord> records = Records({1.0, 1.0});
  records[0].layers[1].grad_norm = 3.0;
  const std::vector<Anomaly> found = DetectRankDivergence(Ranks(records));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(RankOf(found[0]), 0);
  EXPECT_EQ(found[0].layer, "b");
  EXPECT_EQ(MetricOf(found[0]), "grad_norm");
}

TEST(DetectRankDivergence, RanksWithoutARecordDoNotCount) {
  const std::vector<TraceRecord> records = Records({1.0, 10.0});
  std::vector<RankTrace> ranks = Ranks(records);
  ranks.push_back({2, "", nullptr});
  // Judged as a two-rank job: the slow rank against the other one, the empty rank not at all.
  const std::vector<Anomaly> found = DetectRankDivergence(ranks);
  ASSERT_EQ(found.size(), 3u);
  for (const Anomaly& a : found) {
    EXPECT_EQ(RankOf(a), 1);
    EXPECT_EQ(std::get<int64_t>(*FindDetail(a.details, "ranks_compared")), 2);
  }
  ranks[0].record = nullptr;  // One rank left: nothing to compare with.
  EXPECT_TRUE(DetectRankDivergence(ranks).empty());
}

TEST(DetectRankDivergence, WithinThresholdGivesNone) {
  const std::vector<TraceRecord> records = Records({1.0, 1.3, 0.8, 1.1});
  EXPECT_TRUE(DetectRankDivergence(Ranks(records)).empty());
}

TEST(DetectRankDivergence, GradNormDivergence) {
  std::vector<TraceRecord> records = Records({1.0, 1.0, 1.0});
  records[0].layers[2].grad_norm = 40.0;  // A desynchronised rank: latency normal.
  const std::vector<Anomaly> found = DetectRankDivergence(Ranks(records));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].layer, "c");
  EXPECT_EQ(RankOf(found[0]), 0);
  EXPECT_EQ(MetricOf(found[0]), "grad_norm");
  EXPECT_DOUBLE_EQ(std::get<double>(*FindDetail(found[0].details, "value")), 40.0);
  EXPECT_DOUBLE_EQ(std::get<double>(*FindDetail(found[0].details, "median")), 1.0);
  EXPECT_TRUE(absl::StartsWith(found[0].message, "rank 0: gradient norm 40")) << found[0].message;
}

TEST(DetectRankDivergence, LatencyAndGradNormOnOneRankComeInLayerThenRankOrder) {
  std::vector<TraceRecord> records = Records({1.0, 1.0, 1.0});
  records[2].layers[0].latency_ms_mean = 5.0;
  records[1].layers[0].grad_norm = 9.0;
  records[2].layers[0].grad_norm = 1.1;
  const std::vector<Anomaly> found = DetectRankDivergence(Ranks(records));
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(RankOf(found[0]), 1);
  EXPECT_EQ(MetricOf(found[0]), "grad_norm");
  EXPECT_EQ(RankOf(found[1]), 2);
  EXPECT_EQ(MetricOf(found[1]), "latency_ms");
}

TEST(DetectRankDivergence, FastLayersUnderMinLatencyAreIgnored) {
  std::vector<TraceRecord> records = Records({1.0, 1.0, 1.0});
  for (TraceRecord& r : records) r.layers.push_back(Layer("tiny", 0.001));
  records[1].layers[3].latency_ms_mean = 0.05;  // 50x, but under 0.1 ms on every rank.
  EXPECT_TRUE(DetectRankDivergence(Ranks(records)).empty());

  records[1].layers[3].latency_ms_mean = 0.5;  // Now one rank is above the floor: judged.
  const std::vector<Anomaly> found = DetectRankDivergence(Ranks(records));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].layer, "tiny");

  DivergenceThresholds t;
  t.min_latency_ms = 1.0;
  EXPECT_TRUE(DetectRankDivergence(Ranks(records), t).empty());
}

TEST(DetectRankDivergence, LayersMissingOnSomeRanksAreJudgedAmongTheRanksThatHaveThem) {
  std::vector<TraceRecord> records = Records({1.0, 1.0, 1.0});
  records[0].layers.push_back(Layer("only01", 1.0));
  records[1].layers.push_back(Layer("only01", 9.0));  // Two values: the two-rank rule.
  records[2].layers.push_back(Layer("extra", 1.0));   // Only on rank 2: no comparison.
  const std::vector<Anomaly> found = DetectRankDivergence(Ranks(records));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].layer, "only01");
  EXPECT_EQ(RankOf(found[0]), 1);
  EXPECT_EQ(std::get<int64_t>(*FindDetail(found[0].details, "ranks_compared")), 2);
}

TEST(DetectRankDivergence, NonFiniteAndMissingValuesAreSkipped) {
  std::vector<TraceRecord> records = Records({1.0, 1.0, 1.0, 1.0});
  records[0].layers[0].grad_norm = std::numeric_limits<double>::quiet_NaN();
  records[1].layers[0].grad_norm = std::nullopt;
  records[2].layers[0].latency_ms_mean = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(DetectRankDivergence(Ranks(records)).empty());
}

TEST(DetectRankDivergence, LabelsAndThresholds) {
  const std::vector<TraceRecord> records = Records({1.0, 1.0, 1.4});
  std::vector<RankTrace> ranks = Ranks(records);
  ranks[2].label = "session s-3";
  EXPECT_TRUE(DetectRankDivergence(ranks).empty());  // 0.4 away: within the default 0.5.
  DivergenceThresholds t;
  t.latency = 0.45;
  EXPECT_TRUE(DetectRankDivergence(ranks, t).empty());
  t.latency = 0.3;
  const std::vector<Anomaly> found = DetectRankDivergence(ranks, t);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_TRUE(absl::StartsWith(found[0].message, "session s-3: ")) << found[0].message;
  EXPECT_EQ(std::get<std::string>(*FindDetail(found[0].details, "label")), "session s-3");
  EXPECT_DOUBLE_EQ(std::get<double>(*FindDetail(found[0].details, "threshold")), 0.3);
}

TEST(AnomalyType, RankDivergenceSpelling) {
  EXPECT_EQ(ToString(AnomalyType::kRankDivergence), "rank_divergence");
  AnomalyType t = AnomalyType::kNanActivation;
  ASSERT_TRUE(ParseAnomalyType("rank_divergence", &t));
  EXPECT_EQ(t, AnomalyType::kRankDivergence);
}

TEST(DivergenceThresholds, ValidateNamesTheField) {
  EXPECT_TRUE(DivergenceThresholds{}.Validate().ok());
  DivergenceThresholds t;
  t.grad_norm = -1;
  t.min_latency_ms = std::nan("");
  const absl::Status s = t.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "grad_norm")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "min_latency_ms")) << s;
  EXPECT_FALSE(absl::StrContains(s.message(), "latency,")) << s;
  // Invalid thresholds find nothing rather than everything.
  const std::vector<TraceRecord> records = Records({1.0, 1.0, 9.0});
  EXPECT_TRUE(DetectRankDivergence(Ranks(records), t).empty());
}

}  // namespace
}  // namespace tracetorch
