#include "trace/anomaly.h"

#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

TensorInfo Tensor(std::optional<double> mean, std::optional<double> std) {
  TensorInfo t;
  t.shape = {4, 8};
  t.dtype = "torch.float32";
  t.device = "cpu";
  TensorStats s;
  s.mean = mean;
  s.std = std;
  t.stats = s;
  return t;
}

// A healthy layer: input std 1, output mean 0.1 std 1, one forward.
LayerTrace Layer(std::string name) {
  LayerTrace l;
  l.name = name;
  l.full_name = std::move(name);
  l.type = "Linear";
  l.depth = 1;
  l.inputs = {Tensor(0.0, 1.0)};
  l.outputs = {Tensor(0.1, 1.0)};
  l.latency_ms = l.latency_ms_mean = 1.0;
  l.forward_count = 1;
  return l;
}

LayerTrace WithOutput(double mean, double std, double input_std = 1.0) {
  LayerTrace l = Layer("x");
  l.inputs = {Tensor(0.0, input_std)};
  l.outputs = {Tensor(mean, std)};
  return l;
}

std::vector<Anomaly> Detect(std::vector<LayerTrace> layers, const Thresholds& th = {},
                            std::optional<NanOrigin> origin = std::nullopt) {
  TraceRecord record;
  record.layers = std::move(layers);
  record.metadata.nan_origin = std::move(origin);
  absl::StatusOr<std::vector<Anomaly>> found = DetectAnomalies(record, th);
  EXPECT_TRUE(found.ok()) << found.status();
  return found.value_or(std::vector<Anomaly>{});
}

std::vector<AnomalyType> Types(const std::vector<Anomaly>& anomalies) {
  std::vector<AnomalyType> types;
  for (const Anomaly& a : anomalies) types.push_back(a.type);
  return types;
}

TEST(DetectAnomalies, HealthyLayerHasNone) { EXPECT_THAT(Detect({Layer("fc")}), IsEmpty()); }

TEST(DetectAnomalies, IgnoresTheRecordsOwnWarnings) {
  TraceRecord record;
  record.layers = {Layer("fc")};
  record.warnings = {Anomaly{AnomalyType::kDeadLayer, AnomalySeverity::kWarning, "fc", "old", {}}};
  EXPECT_THAT(DetectAnomalies(record).value(), IsEmpty());
}

// ---- nan_activation / inf_activation --------------------------------------------------------

TEST(DetectAnomalies, NanActivationIsCriticalWithCount) {
  LayerTrace l = Layer("blocks.1.fc");
  l.has_nan = true;
  l.outputs[0].stats->nan_count = 3;
  const std::vector<Anomaly> found = Detect({l});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, AnomalyType::kNanActivation);
  EXPECT_EQ(found[0].severity, AnomalySeverity::kCritical);
  EXPECT_EQ(found[0].layer, "blocks.1.fc");
  EXPECT_EQ(found[0].message, "NaN detected in output (3 values)");
  EXPECT_EQ(found[0].details, (Details{{"nan_count", int64_t{3}}}));
}

TEST(DetectAnomalies, StickyNanWithFiniteLatestOutputHasNoCount) {
  LayerTrace l = Layer("fc");
  l.has_nan = true;  // From an earlier call; the latest outputs are finite.
  const std::vector<Anomaly> found = Detect({l});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].message, "NaN detected in output");
}

TEST(DetectAnomalies, InfActivationIsCritical) {
  LayerTrace l = Layer("fc");
  l.has_inf = true;
  l.outputs[0].stats->inf_count = 1;
  const std::vector<Anomaly> found = Detect({l});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, AnomalyType::kInfActivation);
  EXPECT_EQ(found[0].severity, AnomalySeverity::kCritical);
  EXPECT_EQ(found[0].message, "Inf detected in output (1 value)");
}

// ---- dead_layer: |mean| < 1e-6 and std < 1e-6 ------------------------------------------------

TEST(DetectAnomalies, DeadLayerBelowBothThresholds) {
  const std::vector<Anomaly> found = Detect({WithOutput(-5e-7, 5e-7)});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, AnomalyType::kDeadLayer);
  EXPECT_EQ(found[0].severity, AnomalySeverity::kWarning);
  EXPECT_EQ(found[0].message, "Dead layer: output mean=-5e-07 std=5e-07");
  EXPECT_EQ(found[0].details, (Details{{"mean", -5e-7}, {"std", 5e-7}}));
}

TEST(DetectAnomalies, DeadLayerIsStrictOnMean) {
  EXPECT_THAT(Types(Detect({WithOutput(1e-6, 0)})), IsEmpty());    // At.
  EXPECT_THAT(Types(Detect({WithOutput(-1e-6, 0)})), IsEmpty());   // At, negative.
  EXPECT_THAT(Types(Detect({WithOutput(1.1e-6, 0)})), IsEmpty());  // Above.
  EXPECT_THAT(Types(Detect({WithOutput(0.9e-6, 0)})), ElementsAre(AnomalyType::kDeadLayer));
}

TEST(DetectAnomalies, DeadLayerIsStrictOnStd) {
  EXPECT_THAT(Types(Detect({WithOutput(0, 1e-6)})), IsEmpty());    // At.
  EXPECT_THAT(Types(Detect({WithOutput(0, 1.1e-6)})), IsEmpty());  // Above.
  EXPECT_THAT(Types(Detect({WithOutput(0, 0.9e-6)})), ElementsAre(AnomalyType::kDeadLayer));
}

TEST(DetectAnomalies, DeadLayerNeedsKnownStats) {
  LayerTrace l = Layer("emb");
  l.outputs = {Tensor(std::nullopt, std::nullopt)};  // An integer output.
  EXPECT_THAT(Detect({l}), IsEmpty());
  l.outputs[0].stats.reset();  // Statistics not captured.
  EXPECT_THAT(Detect({l}), IsEmpty());
}

// ---- exploding_variance: std > 100; high_variance: 10 < std <= 100 ---------------------------

TEST(DetectAnomalies, ExplodingVarianceIsStrict) {
  // Input std 20 keeps the variance-spike check quiet (ratio <= 10).
  EXPECT_THAT(Types(Detect({WithOutput(0, 100.0, 20)})), ElementsAre(AnomalyType::kHighVariance));
  EXPECT_THAT(Types(Detect({WithOutput(0, 100.001, 20)})),
              ElementsAre(AnomalyType::kExplodingVariance));
  const std::vector<Anomaly> found = Detect({WithOutput(0, 1234.5, 1000)});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].severity, AnomalySeverity::kWarning);
  EXPECT_EQ(found[0].message, "Exploding variance: std=1234.50");
  EXPECT_EQ(found[0].details, (Details{{"std", 1234.5}}));
}

TEST(DetectAnomalies, HugeVariancePrintsInScientificNotation) {
  const std::vector<Anomaly> found = Detect({WithOutput(0, 2.5e9, 1e9)});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].message, "Exploding variance: std=2.5e+09");
}

TEST(DetectAnomalies, HighVarianceIsStrict) {
  EXPECT_THAT(Types(Detect({WithOutput(0, 10.0, 5)})), IsEmpty());
  EXPECT_THAT(Types(Detect({WithOutput(0, 9.99, 5)})), IsEmpty());
  const std::vector<Anomaly> found = Detect({WithOutput(0, 26.52947425842285, 5)});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, AnomalyType::kHighVariance);
  EXPECT_EQ(found[0].severity, AnomalySeverity::kInfo);
  EXPECT_EQ(found[0].message, "High activation variance: std=26.53");
  EXPECT_EQ(found[0].details, (Details{{"std", 26.52947425842285}}));
  EXPECT_THAT(Types(Detect({WithOutput(0, 10.001, 5)})), ElementsAre(AnomalyType::kHighVariance));
}

TEST(DetectAnomalies, LaterOutputsAreCheckedAndNamed) {
  LayerTrace l = Layer("attention");
  l.outputs = {Tensor(0.0, 1.0), Tensor(0.0, 0.0)};
  const std::vector<Anomaly> found = Detect({l});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, AnomalyType::kDeadLayer);
  EXPECT_EQ(found[0].message, "Dead layer: output mean=0 std=0 (output 1)");
  EXPECT_EQ(found[0].details, (Details{{"mean", 0.0}, {"std", 0.0}, {"output", int64_t{1}}}));
}

// ---- variance spike: out std > 10 x in std ---------------------------------------------------

TEST(DetectAnomalies, VarianceSpikeMatchesTheLibrarysMessage) {
  const double in = 0.06761615723371506;
  const double out = 0.9923027753829956;
  const std::vector<Anomaly> found = Detect({WithOutput(0, out, in)});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, AnomalyType::kExplodingVariance);
  EXPECT_EQ(found[0].severity, AnomalySeverity::kWarning);
  EXPECT_EQ(found[0].message, "Variance spike: std increased from 0.07 to 0.99 (x14.7)");
  EXPECT_EQ(found[0].details,
            (Details{{"input_std", in}, {"output_std", out}, {"ratio", out / in}}));
}

TEST(DetectAnomalies, VarianceSpikeIsStrict) {
  EXPECT_THAT(Detect({WithOutput(0, 5.0, 0.5)}), IsEmpty());  // Exactly x10.
  EXPECT_THAT(Detect({WithOutput(0, 4.99, 0.5)}), IsEmpty());
  EXPECT_THAT(Types(Detect({WithOutput(0, 5.01, 0.5)})),
              ElementsAre(AnomalyType::kExplodingVariance));
}

TEST(DetectAnomalies, VarianceSpikeSkipsZeroOrUnknownInputStd) {
  EXPECT_THAT(Detect({WithOutput(0, 5.0, 0.0)}), IsEmpty());
  LayerTrace no_input = WithOutput(0, 5.0);
  no_input.inputs.clear();
  EXPECT_THAT(Detect({no_input}), IsEmpty());
  LayerTrace int_input = WithOutput(0, 5.0);
  int_input.inputs = {Tensor(std::nullopt, std::nullopt)};
  EXPECT_THAT(Detect({int_input}), IsEmpty());
}

TEST(DetectAnomalies, PerOutputChecksComeBeforeTheSpike) {
  // The order tracetorch-ml reports them in (see train_trace_perturbed.json).
  EXPECT_THAT(Types(Detect({WithOutput(8.6, 26.53, 0.52)})),
              ElementsAre(AnomalyType::kHighVariance, AnomalyType::kExplodingVariance));
}

// ---- empty_output, zero_gradient, nan_gradient -------------------------------------------------

TEST(DetectAnomalies, EmptyOutput) {
  LayerTrace l = Layer("noop");
  l.outputs.clear();
  const std::vector<Anomaly> found = Detect({l});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, AnomalyType::kEmptyOutput);
  EXPECT_EQ(found[0].severity, AnomalySeverity::kWarning);
  EXPECT_EQ(found[0].message, "Empty output: layer produced no tensor");
}

TEST(DetectAnomalies, LayerSeenOnlyInBackwardIsNotEmpty) {
  LayerTrace l = Layer("x");
  l.outputs.clear();
  l.inputs.clear();
  l.forward_count = 0;
  l.backward_count = 2;
  EXPECT_THAT(Detect({l}), IsEmpty());
}

TEST(DetectAnomalies, ZeroGradient) {
  LayerTrace l = Layer("fc");
  l.has_zero_grad = true;
  const std::vector<Anomaly> found = Detect({l});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, AnomalyType::kZeroGradient);
  EXPECT_EQ(found[0].severity, AnomalySeverity::kWarning);
  EXPECT_EQ(found[0].message, "Zero gradient: output gradient is all zeros");
}

TEST(DetectAnomalies, NanGradient) {
  LayerTrace l = Layer("fc");
  l.grad_has_nan = true;
  l.grad_in_has_nan = true;  // Not a check of its own.
  const std::vector<Anomaly> found = Detect({l});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, AnomalyType::kNanGradient);
  EXPECT_EQ(found[0].severity, AnomalySeverity::kCritical);
  EXPECT_THAT(found[0].message, HasSubstr("NaN in gradient"));
}

TEST(DetectAnomalies, ChecksRunPerLayerInRecordOrder) {
  LayerTrace a = Layer("a");
  a.grad_has_nan = true;
  a.has_nan = true;
  a.outputs = {Tensor(0, 0)};
  LayerTrace b = Layer("b");
  b.outputs.clear();
  b.has_zero_grad = true;
  const std::vector<Anomaly> found = Detect({a, b});
  EXPECT_THAT(Types(found), ElementsAre(AnomalyType::kNanActivation, AnomalyType::kDeadLayer,
                                        AnomalyType::kNanGradient, AnomalyType::kEmptyOutput,
                                        AnomalyType::kZeroGradient));
  EXPECT_EQ(found[0].layer, "a");
  EXPECT_EQ(found[4].layer, "b");
}

TEST(DetectAnomalies, CustomThresholdsApply) {
  Thresholds th;
  th.high_variance_min = 0.5;
  th.exploding_variance_std = 2.0;
  EXPECT_THAT(Types(Detect({WithOutput(0, 1.0)}, th)), ElementsAre(AnomalyType::kHighVariance));
  EXPECT_THAT(Types(Detect({WithOutput(0, 3.0)}, th)),
              ElementsAre(AnomalyType::kExplodingVariance));
}

// ---- NaN origin grouping ---------------------------------------------------------------------

std::vector<LayerTrace> NanRun() {
  std::vector<LayerTrace> layers;
  for (const char* name : {"stem", "blocks.1.fc", "blocks.1.act", "blocks.1", "blocks", "head"}) {
    layers.push_back(Layer(name));
  }
  for (size_t i = 1; i < layers.size(); ++i) layers[i].has_nan = true;
  layers[5].has_inf = true;
  return layers;
}

TEST(DetectAnomalies, NanOriginGroupsFindingsOnTheOriginLayer) {
  const std::vector<Anomaly> found =
      Detect(NanRun(), {}, NanOrigin{"blocks.1.fc", 3, /*is_nan=*/true});
  ASSERT_EQ(found.size(), 1u);
  const Anomaly& a = found[0];
  EXPECT_EQ(a.type, AnomalyType::kNanActivation);
  EXPECT_EQ(a.severity, AnomalySeverity::kCritical);
  EXPECT_EQ(a.layer, "blocks.1.fc");
  EXPECT_EQ(a.message,
            "NaN first appeared in blocks.1.fc at step 3 (inputs were finite); "
            "4 downstream layers affected");
  EXPECT_EQ(a.details, (Details{{"origin", std::string("blocks.1.fc")},
                                {"step", int64_t{3}},
                                {"downstream", std::vector<std::string>{"blocks.1.act", "blocks.1",
                                                                        "blocks", "head"}}}));
}

TEST(DetectAnomalies, NanOriginInTheModelInput) {
  std::vector<LayerTrace> layers = NanRun();
  layers[0].has_nan = true;
  const std::vector<Anomaly> found = Detect(layers, {}, NanOrigin{"<input>", 0, true});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].layer, "<input>");
  EXPECT_EQ(found[0].message,
            "NaN first appeared in the model input at step 0; 6 downstream layers affected");
}

TEST(DetectAnomalies, InfOriginUsesInfType) {
  std::vector<LayerTrace> layers = {Layer("a"), Layer("b")};
  layers[0].has_inf = true;
  layers[1].has_inf = true;
  const std::vector<Anomaly> found = Detect(layers, {}, NanOrigin{"a", 7, /*is_nan=*/false});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, AnomalyType::kInfActivation);
  EXPECT_EQ(found[0].message,
            "Inf first appeared in a at step 7 (inputs were finite); 1 downstream layer affected");
}

TEST(DetectAnomalies, NanOriginKeepsOtherFindingsInRecordOrder) {
  std::vector<LayerTrace> layers = NanRun();
  layers[0].has_zero_grad = true;  // Before the origin.
  layers[4].grad_has_nan = true;   // After it.
  const std::vector<Anomaly> found = Detect(layers, {}, NanOrigin{"blocks.1.fc", 3, true});
  EXPECT_THAT(Types(found), ElementsAre(AnomalyType::kZeroGradient, AnomalyType::kNanActivation,
                                        AnomalyType::kNanGradient));
}

TEST(DetectAnomalies, NanOriginWithoutDownstream) {
  std::vector<LayerTrace> layers = {Layer("a"), Layer("b")};
  layers[1].has_nan = true;
  const std::vector<Anomaly> found = Detect(layers, {}, NanOrigin{"b", 1, true});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_THAT(found[0].message, HasSubstr("no downstream layers affected"));
}

// ---- Threshold validation --------------------------------------------------------------------

TEST(Thresholds, DefaultsAreValid) {
  const Thresholds th;
  EXPECT_EQ(th.dead_layer_mean, 1e-6);
  EXPECT_EQ(th.dead_layer_std, 1e-6);
  EXPECT_EQ(th.exploding_variance_std, 100.0);
  EXPECT_EQ(th.high_variance_min, 10.0);
  EXPECT_EQ(th.variance_spike_ratio, 10.0);
  EXPECT_TRUE(th.Validate().ok());
}

TEST(Thresholds, RejectsNegativeAndNonFinite) {
  Thresholds th;
  th.dead_layer_std = -1;
  absl::Status s = th.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("dead_layer_std"));

  th = Thresholds{};
  th.dead_layer_mean = std::numeric_limits<double>::quiet_NaN();
  s = th.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("dead_layer_mean"), HasSubstr("finite")));

  th = Thresholds{};
  th.exploding_variance_std = std::numeric_limits<double>::infinity();
  EXPECT_EQ(th.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Thresholds, RejectsHighVarianceNotBelowExploding) {
  Thresholds th;
  th.high_variance_min = 100;  // Equal: no std could be "high" without also exploding.
  const absl::Status s = th.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("high_variance_min"), HasSubstr("exploding_variance_std")));
  th.high_variance_min = 99.9;
  EXPECT_TRUE(th.Validate().ok());
}

TEST(Thresholds, RejectsSpikeRatioNotAboveOne) {
  Thresholds th;
  th.variance_spike_ratio = 1.0;
  const absl::Status s = th.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("variance_spike_ratio"));
  EXPECT_THAT(s.message(), Not(HasSubstr("high_variance_min")));
  th.variance_spike_ratio = 1.01;
  EXPECT_TRUE(th.Validate().ok());
}

TEST(Thresholds, NamesEveryOffendingField) {
  Thresholds th;
  th.dead_layer_mean = -1;
  th.variance_spike_ratio = 0.5;
  const absl::Status s = th.Validate();
  EXPECT_THAT(s.message(), AllOf(HasSubstr("dead_layer_mean"), HasSubstr("variance_spike_ratio")));
}

TEST(DetectAnomalies, ReturnsTheValidationError) {
  Thresholds th;
  th.high_variance_min = 200;
  TraceRecord record;
  record.layers = {Layer("fc")};
  absl::StatusOr<std::vector<Anomaly>> found = DetectAnomalies(record, th);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(found.status().message(), HasSubstr("high_variance_min"));
}

}  // namespace
}  // namespace tracetorch
