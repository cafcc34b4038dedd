#include "trace/diff.h"

#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TensorInfo Output(std::vector<int64_t> shape, double std) {
  TensorInfo t;
  t.shape = std::move(shape);
  t.dtype = "torch.float32";
  t.device = "cpu";
  TensorStats s;
  s.mean = 0;
  s.std = std;
  t.stats = s;
  return t;
}

LayerTrace Layer(std::string full_name, double latency_mean = 1.0, double grad_norm = 1.0,
                 double std = 1.0) {
  LayerTrace l;
  l.name = full_name;
  l.full_name = std::move(full_name);
  l.type = "Linear";
  l.outputs = {Output({16, 64}, std)};
  l.latency_ms = l.latency_ms_mean = latency_mean;
  l.forward_count = 20;
  l.grad_norm = grad_norm;
  return l;
}

TraceRecord Record(std::vector<LayerTrace> layers, std::vector<Anomaly> warnings = {}) {
  TraceRecord r;
  r.metadata.model_name = "Net";
  r.layers = std::move(layers);
  r.warnings = std::move(warnings);
  return r;
}

Anomaly MakeAnomaly(std::string layer, AnomalyType type, AnomalySeverity severity,
                    std::string message) {
  return Anomaly{type, severity, std::move(layer), std::move(message), {}};
}

std::vector<DiffKind> Kinds(const TraceDiff& diff) {
  std::vector<DiffKind> kinds;
  for (const DiffEntry& e : diff.entries) kinds.push_back(e.kind);
  return kinds;
}

TEST(DiffRecords, IdenticalRecordsHaveNoEntries) {
  const TraceRecord r = Record({Layer("a"), Layer("b")});
  const TraceDiff diff = DiffRecords(r, r);
  EXPECT_THAT(diff.entries, IsEmpty());
  EXPECT_EQ(diff.baseline_model, "Net");
  EXPECT_EQ(diff.current_model, "Net");
  EXPECT_FALSE(diff.has_regressions());
  EXPECT_EQ(diff.critical_count(), 0);
  EXPECT_EQ(diff.warning_count(), 0);
}

TEST(DiffRecords, LatencyRegressionMatchesTheLibrary) {
  const TraceDiff diff = DiffRecords(Record({Layer("stem", 0.03457165001350404)}),
                                     Record({Layer("stem", 0.0464809499931107)}));
  ASSERT_EQ(diff.entries.size(), 1u);
  const DiffEntry& e = diff.entries[0];
  EXPECT_EQ(e.severity, DiffSeverity::kWarning);
  EXPECT_EQ(e.kind, DiffKind::kLatencyRegression);
  EXPECT_EQ(e.layer, "stem");
  EXPECT_EQ(e.message, "Latency regression: 0.035ms -> 0.046ms (+34.4%)");
  const double rel = (0.0464809499931107 - 0.03457165001350404) / 0.03457165001350404;
  EXPECT_EQ(e.details, (Details{{"baseline_ms", 0.03457165001350404},
                                {"current_ms", 0.0464809499931107},
                                {"relative", rel},
                                {"baseline_count", int64_t{20}},
                                {"current_count", int64_t{20}}}));
  EXPECT_TRUE(diff.has_regressions());
  EXPECT_EQ(diff.warning_count(), 1);
}

TEST(DiffRecords, LatencyKeepsThreeDecimalsAboveOneMillisecond) {
  const TraceDiff diff = DiffRecords(Record({Layer("blocks", 1.4481470500015803)}),
                                     Record({Layer("blocks", 1.804420100012294)}));
  ASSERT_EQ(diff.entries.size(), 1u);
  EXPECT_EQ(diff.entries[0].message, "Latency regression: 1.448ms -> 1.804ms (+24.6%)");
}

TEST(DiffRecords, LatencyImprovementIsInfo) {
  const TraceDiff diff = DiffRecords(Record({Layer("act", 0.31385130001240213)}),
                                     Record({Layer("act", 0.07156190000614515)}));
  ASSERT_EQ(diff.entries.size(), 1u);
  const DiffEntry& e = diff.entries[0];
  EXPECT_EQ(e.severity, DiffSeverity::kInfo);
  EXPECT_EQ(e.kind, DiffKind::kLatencyImprovement);
  EXPECT_EQ(e.message, "Latency improved: 0.314ms -> 0.072ms (-77.2%)");
  ASSERT_EQ(e.details.size(), 3u);  // As tracetorch-ml writes it: no call counts.
  EXPECT_EQ(e.details[2].first, "relative");
  EXPECT_FALSE(diff.has_regressions());
}

TEST(DiffRecords, LatencyThresholdIsStrict) {
  // 1.0 -> 1.1 is +10% in real numbers but not exactly in doubles; use exact binary fractions.
  DiffThresholds th;
  th.latency = 0.25;
  EXPECT_THAT(DiffRecords(Record({Layer("a", 4.0)}), Record({Layer("a", 5.0)}), th).entries,
              IsEmpty());  // Exactly +25%.
  EXPECT_THAT(DiffRecords(Record({Layer("a", 4.0)}), Record({Layer("a", 3.0)}), th).entries,
              IsEmpty());  // Exactly -25%.
  EXPECT_THAT(Kinds(DiffRecords(Record({Layer("a", 4.0)}), Record({Layer("a", 5.0625)}), th)),
              ElementsAre(DiffKind::kLatencyRegression));
  EXPECT_THAT(Kinds(DiffRecords(Record({Layer("a", 4.0)}), Record({Layer("a", 2.9375)}), th)),
              ElementsAre(DiffKind::kLatencyImprovement));
}

TEST(DiffRecords, SkipsUnknownOrZeroBaselines) {
  LayerTrace unknown = Layer("a");
  unknown.latency_ms_mean.reset();
  unknown.grad_norm.reset();
  unknown.outputs[0].stats->std.reset();
  EXPECT_THAT(DiffRecords(Record({unknown}), Record({Layer("a", 9, 9, 9)})).entries, IsEmpty());
  EXPECT_THAT(DiffRecords(Record({Layer("a", 9, 9, 9)}), Record({unknown})).entries, IsEmpty());
  EXPECT_THAT(DiffRecords(Record({Layer("a", 0, 0, 0)}), Record({Layer("a", 9, 9, 9)})).entries,
              IsEmpty());
  LayerTrace no_stats = Layer("a");
  no_stats.outputs[0].stats.reset();
  EXPECT_THAT(DiffRecords(Record({no_stats}), Record({Layer("a", 1, 1, 9)})).entries, IsEmpty());
}

TEST(DiffRecords, GradNormGrowthIsWarningShrinkIsInfo) {
  TraceDiff grew = DiffRecords(Record({Layer("stem", 1, 0.16485029458999634)}),
                               Record({Layer("stem", 1, 0.7755163908004761)}));
  ASSERT_EQ(grew.entries.size(), 1u);
  EXPECT_EQ(grew.entries[0].kind, DiffKind::kGradNormChange);
  EXPECT_EQ(grew.entries[0].severity, DiffSeverity::kWarning);
  EXPECT_EQ(grew.entries[0].message, "Gradient norm changed: 0.1649 -> 0.7755 (+370.4%)");
  ASSERT_EQ(grew.entries[0].details.size(), 3u);
  EXPECT_EQ(grew.entries[0].details[0],
            (std::pair<std::string, DetailValue>{"baseline", 0.16485029458999634}));

  TraceDiff shrank = DiffRecords(Record({Layer("a", 1, 2.0)}), Record({Layer("a", 1, 1.0)}));
  ASSERT_EQ(shrank.entries.size(), 1u);
  EXPECT_EQ(shrank.entries[0].severity, DiffSeverity::kInfo);
  EXPECT_EQ(shrank.entries[0].message, "Gradient norm changed: 2.0000 -> 1.0000 (-50.0%)");
}

TEST(DiffRecords, GradNormThresholdIsStrict) {
  // Default 0.25: 4 -> 5 is exactly +25%, 4 -> 3 exactly -25%.
  EXPECT_THAT(DiffRecords(Record({Layer("a", 1, 4)}), Record({Layer("a", 1, 5)})).entries,
              IsEmpty());
  EXPECT_THAT(DiffRecords(Record({Layer("a", 1, 4)}), Record({Layer("a", 1, 3)})).entries,
              IsEmpty());
  EXPECT_THAT(Kinds(DiffRecords(Record({Layer("a", 1, 4)}), Record({Layer("a", 1, 5.0625)}))),
              ElementsAre(DiffKind::kGradNormChange));
  EXPECT_THAT(Kinds(DiffRecords(Record({Layer("a", 1, 4)}), Record({Layer("a", 1, 2.9375)}))),
              ElementsAre(DiffKind::kGradNormChange));
}

TEST(DiffRecords, ActivationStdChangeUsesTheFirstOutput) {
  LayerTrace b = Layer("norm", 1, 1, 0.9923027753829956);
  LayerTrace c = Layer("norm", 1, 1, 0.49478790163993835);
  c.outputs.push_back(Output({16, 64}, 100));  // Later outputs do not count...
  b.outputs.push_back(Output({16, 64}, 1));    // ...and the shapes still match.
  const TraceDiff diff = DiffRecords(Record({b}), Record({c}));
  ASSERT_EQ(diff.entries.size(), 1u);
  EXPECT_EQ(diff.entries[0].kind, DiffKind::kActivationStdChange);
  EXPECT_EQ(diff.entries[0].severity, DiffSeverity::kInfo);
  EXPECT_EQ(diff.entries[0].message, "Output std changed: 0.9923 -> 0.4948 (-50.1%)");

  const TraceDiff grew = DiffRecords(Record({Layer("h", 1, 1, 0.44097259640693665)}),
                                     Record({Layer("h", 1, 1, 26.52947425842285)}));
  ASSERT_EQ(grew.entries.size(), 1u);
  EXPECT_EQ(grew.entries[0].severity, DiffSeverity::kWarning);
  EXPECT_EQ(grew.entries[0].message, "Output std changed: 0.4410 -> 26.5295 (+5916.1%)");
}

TEST(DiffRecords, StdThresholdIsStrict) {
  DiffThresholds th;
  th.std = 0.5;
  EXPECT_THAT(DiffRecords(Record({Layer("a", 1, 1, 2)}), Record({Layer("a", 1, 1, 3)}), th).entries,
              IsEmpty());
  EXPECT_THAT(
      Kinds(DiffRecords(Record({Layer("a", 1, 1, 2)}), Record({Layer("a", 1, 1, 3.0625)}), th)),
      ElementsAre(DiffKind::kActivationStdChange));
}

TEST(DiffRecords, ShapeChangeIsCritical) {
  LayerTrace c = Layer("fc");
  c.outputs[0].shape = {16, 32};
  const TraceDiff diff = DiffRecords(Record({Layer("fc")}), Record({c}));
  ASSERT_EQ(diff.entries.size(), 1u);
  const DiffEntry& e = diff.entries[0];
  EXPECT_EQ(e.kind, DiffKind::kShapeChange);
  EXPECT_EQ(e.severity, DiffSeverity::kCritical);
  EXPECT_EQ(e.message, "Output shape changed: [16, 64] -> [16, 32]");
  EXPECT_EQ(e.details,
            (Details{{"baseline", std::string("[16, 64]")}, {"current", std::string("[16, 32]")}}));
  EXPECT_EQ(diff.critical_count(), 1);
  EXPECT_TRUE(diff.has_regressions());
}

TEST(DiffRecords, ShapeChangeInOutputCount) {
  LayerTrace c = Layer("attn");
  c.outputs.push_back(Output({8, 8}, 1));
  LayerTrace none = Layer("attn");
  none.outputs.clear();
  EXPECT_EQ(DiffRecords(Record({Layer("attn")}), Record({c})).entries.at(0).message,
            "Output shape changed: [16, 64] -> [16, 64], [8, 8]");
  EXPECT_EQ(DiffRecords(Record({Layer("attn")}), Record({none})).entries.at(0).message,
            "Output shape changed: [16, 64] -> none");
}

TEST(DiffRecords, LayerAddedAndRemovedAreWarnings) {
  LayerTrace gone = Layer("old");
  gone.type = "Conv2d";
  const TraceDiff diff =
      DiffRecords(Record({Layer("a"), gone}), Record({Layer("new1"), Layer("a"), Layer("new2")}));
  ASSERT_THAT(Kinds(diff),
              ElementsAre(DiffKind::kLayerRemoved, DiffKind::kLayerAdded, DiffKind::kLayerAdded));
  EXPECT_EQ(diff.entries[0].layer, "old");
  EXPECT_EQ(diff.entries[0].severity, DiffSeverity::kWarning);
  EXPECT_EQ(diff.entries[0].message, "Layer removed: old (Conv2d)");
  EXPECT_EQ(diff.entries[1].layer, "new1");
  EXPECT_EQ(diff.entries[1].message, "Layer added: new1 (Linear)");
  EXPECT_EQ(diff.entries[2].layer, "new2");
  EXPECT_EQ(diff.entries[2].severity, DiffSeverity::kWarning);
  EXPECT_EQ(diff.warning_count(), 3);
}

TEST(DiffRecords, NewAnomalySeverityFollowsTheAnomaly) {
  const TraceRecord base = Record({Layer("a")});
  const TraceRecord cur = Record(
      {Layer("a")}, {MakeAnomaly("a", AnomalyType::kHighVariance, AnomalySeverity::kInfo,
                                 "High activation variance: std=26.53"),
                     MakeAnomaly("a", AnomalyType::kNanActivation, AnomalySeverity::kCritical,
                                 "NaN detected in output (3 values)")});
  const TraceDiff diff = DiffRecords(base, cur);
  ASSERT_EQ(diff.entries.size(), 2u);
  EXPECT_EQ(diff.entries[0].kind, DiffKind::kNewAnomaly);
  EXPECT_EQ(diff.entries[0].severity, DiffSeverity::kWarning);
  EXPECT_EQ(diff.entries[0].message, "New anomaly: High activation variance: std=26.53");
  EXPECT_EQ(diff.entries[0].details,
            (Details{{"type", std::string("high_variance")}, {"severity", std::string("info")}}));
  EXPECT_EQ(diff.entries[1].severity, DiffSeverity::kCritical);
  EXPECT_EQ(diff.entries[1].message, "New anomaly: NaN detected in output (3 values)");
  EXPECT_EQ(diff.critical_count(), 1);
  EXPECT_EQ(diff.warning_count(), 1);
}

TEST(DiffRecords, ResolvedAnomalyIsInfo) {
  const TraceRecord base =
      Record({Layer("norm")},
             {MakeAnomaly("norm", AnomalyType::kExplodingVariance, AnomalySeverity::kWarning,
                          "Variance spike: std increased from 0.07 to 0.99 (x14.7)")});
  const TraceDiff diff = DiffRecords(base, Record({Layer("norm")}));
  ASSERT_EQ(diff.entries.size(), 1u);
  EXPECT_EQ(diff.entries[0].kind, DiffKind::kResolvedAnomaly);
  EXPECT_EQ(diff.entries[0].severity, DiffSeverity::kInfo);
  EXPECT_EQ(diff.entries[0].layer, "norm");
  EXPECT_EQ(diff.entries[0].message,
            "Resolved anomaly: Variance spike: std increased from 0.07 to 0.99 (x14.7)");
  EXPECT_EQ(diff.entries[0].details, (Details{{"type", std::string("exploding_variance")}}));
  EXPECT_FALSE(diff.has_regressions());
}

TEST(DiffRecords, AnomaliesMatchByLayerAndType) {
  // Same layer and type with other numbers: neither new nor resolved.
  const TraceRecord base =
      Record({Layer("h")}, {MakeAnomaly("h", AnomalyType::kHighVariance, AnomalySeverity::kInfo,
                                        "High activation variance: std=12.00")});
  const TraceRecord cur =
      Record({Layer("h")}, {MakeAnomaly("h", AnomalyType::kHighVariance, AnomalySeverity::kInfo,
                                        "High activation variance: std=30.00"),
                            MakeAnomaly("g", AnomalyType::kHighVariance, AnomalySeverity::kInfo,
                                        "High activation variance: std=30.00"),
                            MakeAnomaly("h", AnomalyType::kDeadLayer, AnomalySeverity::kWarning,
                                        "Dead layer: output mean=0 std=0")});
  const TraceDiff diff = DiffRecords(base, cur);
  ASSERT_THAT(Kinds(diff), ElementsAre(DiffKind::kNewAnomaly, DiffKind::kNewAnomaly));
  EXPECT_EQ(diff.entries[0].layer, "g");
  EXPECT_EQ(diff.entries[1].layer, "h");
  EXPECT_THAT(diff.entries[1].message, HasSubstr("Dead layer"));
}

// A warning of a type this version does not know (read from another tool's file) matches the
// same spelling on the same layer, and its entry names that spelling.
TEST(DiffRecords, UnknownAnomalyTypesMatchBySpelling) {
  const auto unknown = [](std::string layer, std::string type) {
    Anomaly a = MakeAnomaly(std::move(layer), AnomalyType::kUnknown, AnomalySeverity::kWarning,
                            "from elsewhere");
    a.unknown_type = std::move(type);
    return a;
  };
  const TraceRecord base = Record({Layer("h")}, {unknown("h", "drift"), unknown("h", "gone")});
  const TraceRecord cur = Record({Layer("h")}, {unknown("h", "drift"), unknown("h", "test")});
  const TraceDiff diff = DiffRecords(base, cur);
  ASSERT_THAT(Kinds(diff), ElementsAre(DiffKind::kNewAnomaly, DiffKind::kResolvedAnomaly));
  const DetailValue* added = FindDetail(diff.entries[0].details, "type");
  ASSERT_NE(added, nullptr);
  EXPECT_EQ(std::get<std::string>(*added), "test");
  const DetailValue* resolved = FindDetail(diff.entries[1].details, "type");
  ASSERT_NE(resolved, nullptr);
  EXPECT_EQ(std::get<std::string>(*resolved), "gone");
}

TEST(DiffRecords, OrderIsDeterministic) {
  LayerTrace b1 = Layer("b1", 1.0, 1.0, 1.0);
  LayerTrace c1 = Layer("b1", 2.0, 2.0, 2.0);
  c1.outputs[0].shape = {1};
  c1.outputs[0].stats->std = 2.0;
  const TraceRecord base =
      Record({Layer("gone"), b1, Layer("b2", 1.0)},
             {MakeAnomaly("gone", AnomalyType::kDeadLayer, AnomalySeverity::kWarning, "r1"),
              MakeAnomaly("b2", AnomalyType::kZeroGradient, AnomalySeverity::kWarning, "r2")});
  const TraceRecord cur =
      Record({Layer("b2", 0.5), Layer("added"), c1},
             {MakeAnomaly("b1", AnomalyType::kNanGradient, AnomalySeverity::kCritical, "n1"),
              MakeAnomaly("added", AnomalyType::kEmptyOutput, AnomalySeverity::kWarning, "n2")});
  const TraceDiff diff = DiffRecords(base, cur);
  EXPECT_THAT(
      Kinds(diff),
      ElementsAre(DiffKind::kLayerRemoved, DiffKind::kShapeChange, DiffKind::kLatencyRegression,
                  DiffKind::kGradNormChange, DiffKind::kActivationStdChange,
                  DiffKind::kLatencyImprovement, DiffKind::kLayerAdded, DiffKind::kNewAnomaly,
                  DiffKind::kNewAnomaly, DiffKind::kResolvedAnomaly, DiffKind::kResolvedAnomaly));
  std::vector<std::string> layers;
  for (const DiffEntry& e : diff.entries) layers.push_back(e.layer);
  EXPECT_THAT(layers, ElementsAre("gone", "b1", "b1", "b1", "b1", "b2", "added", "b1", "added",
                                  "gone", "b2"));
  // Same inputs, same output.
  EXPECT_EQ(DiffRecords(base, cur).entries, diff.entries);
}

// ---- Noise-aware latency -----------------------------------------------------------------------

LatencySamples Samples(const std::string& layer, std::vector<double> values) {
  LatencySamples s;
  s.by_layer[layer] = std::move(values);
  return s;
}

const DetailValue& Detail(const DiffEntry& e, std::string_view key) {
  const DetailValue* v = FindDetail(e.details, key);
  static const DetailValue kMissing = std::string("<missing>");
  return v != nullptr ? *v : kMissing;
}

TEST(NoiseAwareDiff, NoisyButEqualStepsWithShiftedMeansAreNotARegression) {
  // Same step distribution on both sides (jitter of +-40%), but the current run had two stalls that
  // pull its mean up by far more than the 10% threshold: the mean rule flags it, the samples do
  // not.
  const std::vector<double> base = {0.6, 1.4, 0.8, 1.2, 1.0, 0.7, 1.3, 0.9, 1.1, 1.0};
  const std::vector<double> cur = {1.4, 0.6, 1.2, 0.8, 1.0, 1.3, 0.7, 1.1, 9.0, 8.0};
  const TraceRecord b = Record({Layer("fc", 1.0)});
  const TraceRecord c = Record({Layer("fc", 2.51)});
  ASSERT_THAT(Kinds(DiffRecords(b, c)), ElementsAre(DiffKind::kLatencyRegression));
  const TraceDiff diff = DiffRecords(b, Samples("fc", base), c, Samples("fc", cur));
  EXPECT_THAT(diff.entries, IsEmpty());
  EXPECT_FALSE(diff.has_regressions());
}

TEST(NoiseAwareDiff, ShiftWithinTheSpreadIsNoise) {
  // Medians +20% (beyond the threshold) but the steps spread wider than the shift: the middle
  // halves overlap.
  const std::vector<double> base = {0.5, 0.7, 0.9, 1.0, 1.1, 1.3, 1.5};
  const std::vector<double> cur = {0.7, 0.9, 1.1, 1.2, 1.3, 1.5, 1.7};
  const TraceDiff diff = DiffRecords(Record({Layer("fc", 1.0)}), Samples("fc", base),
                                     Record({Layer("fc", 1.2)}), Samples("fc", cur));
  EXPECT_THAT(diff.entries, IsEmpty());
}

TEST(NoiseAwareDiff, RealShiftIsARegressionAndSaysSo) {
  const std::vector<double> base = {1.00, 1.02, 0.98, 1.01, 0.99, 1.00};
  const std::vector<double> cur = {1.30, 1.31, 1.29, 1.30, 1.32, 1.28, 1.30, 1.30};
  LayerTrace cl = Layer("fc", 1.3);
  cl.forward_count = 8;
  const TraceDiff diff = DiffRecords(Record({Layer("fc", 1.0)}), Samples("fc", base), Record({cl}),
                                     Samples("fc", cur));
  ASSERT_EQ(diff.entries.size(), 1u);
  const DiffEntry& e = diff.entries[0];
  EXPECT_EQ(e.kind, DiffKind::kLatencyRegression);
  EXPECT_EQ(e.severity, DiffSeverity::kWarning);
  EXPECT_EQ(e.layer, "fc");
  EXPECT_EQ(e.message,
            "Latency regression: 1.000ms -> 1.300ms (+30.0%; medians of 6 vs 8 steps, beyond step "
            "noise)");
  EXPECT_EQ(Detail(e, "rule"), DetailValue(std::string("median+iqr")));
  EXPECT_EQ(Detail(e, "baseline_ms"), DetailValue(1.0));
  EXPECT_EQ(Detail(e, "current_ms"), DetailValue(1.30));
  EXPECT_EQ(Detail(e, "baseline_samples"), DetailValue(int64_t{6}));
  EXPECT_EQ(Detail(e, "current_samples"), DetailValue(int64_t{8}));
  EXPECT_EQ(Detail(e, "baseline_count"), DetailValue(int64_t{20}));
  EXPECT_EQ(Detail(e, "current_count"), DetailValue(int64_t{8}));
  // Sorted base: .98 .99 1.00 1.00 1.01 1.02 -> q1 at h=1.25: 0.9925, q3 at h=3.75: 1.0075.
  EXPECT_DOUBLE_EQ(std::get<double>(Detail(e, "baseline_q1_ms")), 0.9925);
  EXPECT_DOUBLE_EQ(std::get<double>(Detail(e, "baseline_q3_ms")), 1.0075);
  EXPECT_GT(std::get<double>(Detail(e, "current_q1_ms")),
            std::get<double>(Detail(e, "baseline_q3_ms")));
  EXPECT_DOUBLE_EQ(std::get<double>(Detail(e, "relative")), 0.3);
  EXPECT_TRUE(diff.has_regressions());
}

TEST(NoiseAwareDiff, RealImprovementIsInfo) {
  const std::vector<double> base = {2.0, 2.1, 1.9, 2.0, 2.0};
  const std::vector<double> cur = {1.0, 1.1, 0.9, 1.0, 1.0};
  const TraceDiff diff = DiffRecords(Record({Layer("fc", 2.0)}), Samples("fc", base),
                                     Record({Layer("fc", 1.0)}), Samples("fc", cur));
  ASSERT_EQ(diff.entries.size(), 1u);
  EXPECT_EQ(diff.entries[0].kind, DiffKind::kLatencyImprovement);
  EXPECT_EQ(diff.entries[0].severity, DiffSeverity::kInfo);
  EXPECT_THAT(diff.entries[0].message, HasSubstr("(-50.0%; medians of 5 vs 5 steps"));
  EXPECT_FALSE(diff.has_regressions());
}

TEST(NoiseAwareDiff, BandsApartButWithinTheThresholdIsNothing) {
  // A tiny, very consistent shift (+5%) is real but below the 10% threshold.
  const std::vector<double> base = {1.0, 1.0, 1.0, 1.0, 1.0};
  const std::vector<double> cur = {1.05, 1.05, 1.05, 1.05, 1.05};
  EXPECT_THAT(DiffRecords(Record({Layer("fc", 1.0)}), Samples("fc", base),
                          Record({Layer("fc", 1.05)}), Samples("fc", cur))
                  .entries,
              IsEmpty());
}

TEST(NoiseAwareDiff, MedianNotMeanDecides) {
  // The records' means agree (no mean-rule entry) but the steps moved: a real regression hidden
  // by a slow warm-up step in the baseline.
  const std::vector<double> base = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 4.0};
  const std::vector<double> cur = {1.3, 1.3, 1.3, 1.3, 1.3, 1.3, 1.3, 1.3, 1.3, 1.3};
  const TraceRecord b = Record({Layer("fc", 1.3)});
  const TraceRecord c = Record({Layer("fc", 1.3)});
  ASSERT_THAT(DiffRecords(b, c).entries, IsEmpty());
  EXPECT_THAT(Kinds(DiffRecords(b, Samples("fc", base), c, Samples("fc", cur))),
              ElementsAre(DiffKind::kLatencyRegression));
}

TEST(NoiseAwareDiff, TooFewOrOneSidedSamplesKeepTheMeanRule) {
  const TraceRecord b = Record({Layer("fc", 1.0)});
  const TraceRecord c = Record({Layer("fc", 1.5)});
  const TraceDiff plain = DiffRecords(b, c);
  ASSERT_THAT(Kinds(plain), ElementsAre(DiffKind::kLatencyRegression));
  const std::vector<double> flat = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
  // Samples on one side only.
  EXPECT_EQ(DiffRecords(b, Samples("fc", flat), c, LatencySamples()).entries, plain.entries);
  EXPECT_EQ(DiffRecords(b, LatencySamples(), c, Samples("fc", flat)).entries, plain.entries);
  // Four usable samples on one side (NaN, Inf and negative values do not count).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(
      DiffRecords(b, Samples("fc", {1.0, 1.0, 1.0, 1.0, nan, inf, -1.0}), c, Samples("fc", flat))
          .entries,
      plain.entries);
  // Samples for another layer only.
  EXPECT_EQ(DiffRecords(b, Samples("other", flat), c, Samples("other", flat)).entries,
            plain.entries);
  // Empty samples: exactly the plain diff, entry for entry, on a record with every kind.
  EXPECT_EQ(DiffRecords(b, LatencySamples(), c, LatencySamples()).entries, plain.entries);
}

TEST(NoiseAwareDiff, OnlyLatencyChangesTheRestIsAsBefore) {
  // Samples that say "noise" suppress the latency entry and nothing else.
  LayerTrace cl = Layer("fc", 2.0, 2.0, 1.0);
  cl.outputs[0].shape = {1};
  const TraceRecord b = Record({Layer("fc", 1.0, 1.0, 1.0), Layer("gone")});
  const TraceRecord c = Record({cl, Layer("new")});
  const std::vector<double> noisy = {0.2, 3.0, 0.5, 2.5, 1.0, 1.8, 0.7};
  EXPECT_THAT(
      Kinds(DiffRecords(b, c)),
      ElementsAre(DiffKind::kShapeChange, DiffKind::kLatencyRegression, DiffKind::kGradNormChange,
                  DiffKind::kLayerRemoved, DiffKind::kLayerAdded));
  EXPECT_THAT(Kinds(DiffRecords(b, Samples("fc", noisy), c, Samples("fc", noisy))),
              ElementsAre(DiffKind::kShapeChange, DiffKind::kGradNormChange,
                          DiffKind::kLayerRemoved, DiffKind::kLayerAdded));
}

TEST(DiffThresholds, Validate) {
  EXPECT_TRUE(DiffThresholds{}.Validate().ok());
  EXPECT_EQ(DiffThresholds{}.latency, 0.10);
  EXPECT_EQ(DiffThresholds{}.grad_norm, 0.25);
  EXPECT_EQ(DiffThresholds{}.std, 0.25);
  DiffThresholds th;
  th.grad_norm = -0.1;
  absl::Status s = th.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("grad_norm"));
  th = DiffThresholds{};
  th.latency = std::numeric_limits<double>::quiet_NaN();
  s = th.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("latency"));
  th = DiffThresholds{};
  th.std = std::numeric_limits<double>::infinity();
  EXPECT_EQ(th.Validate().code(), absl::StatusCode::kInvalidArgument);
  th.std = 0;  // Zero is allowed: any change is reported.
  EXPECT_TRUE(th.Validate().ok());
}

TEST(DiffEnums, Spellings) {
  EXPECT_EQ(ToString(DiffSeverity::kInfo), "info");
  EXPECT_EQ(ToString(DiffSeverity::kWarning), "warning");
  EXPECT_EQ(ToString(DiffSeverity::kCritical), "critical");
  EXPECT_EQ(ToString(DiffKind::kLayerAdded), "layer_added");
  EXPECT_EQ(ToString(DiffKind::kLayerRemoved), "layer_removed");
  EXPECT_EQ(ToString(DiffKind::kShapeChange), "shape_change");
  EXPECT_EQ(ToString(DiffKind::kLatencyRegression), "latency_regression");
  EXPECT_EQ(ToString(DiffKind::kLatencyImprovement), "latency_improvement");
  EXPECT_EQ(ToString(DiffKind::kGradNormChange), "grad_norm_change");
  EXPECT_EQ(ToString(DiffKind::kActivationStdChange), "activation_std_change");
  EXPECT_EQ(ToString(DiffKind::kNewAnomaly), "new_anomaly");
  EXPECT_EQ(ToString(DiffKind::kResolvedAnomaly), "resolved_anomaly");
}

}  // namespace
}  // namespace tracetorch
