#include "agent/tracer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/variable.h>

#include <cmath>
#include <limits>
#include <vector>

namespace tracetorch::agent {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

class TracerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::manual_seed(7);
    TraceMetadata metadata;
    metadata.model_name = "Net";
    tracer_ = *Tracer::Create(TracerOptions{}, metadata);
    a_ = *tracer_->DeclareLayer({"a", "Linear", "a", 1, 10});
    b_ = *tracer_->DeclareLayer({"b", "ReLU", "b", 1, 0});
    ASSERT_TRUE(tracer_->Start().ok());
  }

  // One root forward: root(x) -> a -> b, with the given layer functions.
  template <typename FA, typename FB>
  at::Tensor Forward(const at::Tensor& x, FA fa, FB fb) {
    Tracer::CallId root = tracer_->BeginCall(Tracer::kNoLayer, /*is_root=*/true, {x});
    Tracer::CallId ca = tracer_->BeginCall(a_, false, {x});
    at::Tensor h = fa(x);
    tracer_->EndCall(ca, {h});
    Tracer::CallId cb = tracer_->BeginCall(b_, false, {h});
    at::Tensor y = fb(h);
    tracer_->EndCall(cb, {y});
    tracer_->EndCall(root, {y});
    return y;
  }

  const LayerTrace& Layer(const TraceRecord& r, const char* name) {
    const LayerTrace* l = r.FindLayer(name);
    EXPECT_NE(l, nullptr) << name;
    return *l;
  }

  std::shared_ptr<Tracer> tracer_;
  Tracer::LayerId a_ = 0;
  Tracer::LayerId b_ = 0;
};

TEST_F(TracerTest, RecordsShapesStatsCountsAndSteps) {
  for (int i = 0; i < 3; ++i) {
    Forward(
        at::randn({4, 8}), [](const at::Tensor& x) { return x * 2; },
        [](const at::Tensor& h) { return at::relu(h); });
  }
  const TraceRecord r = tracer_->Snapshot();
  ASSERT_EQ(r.layers.size(), 2u);
  const LayerTrace& a = Layer(r, "a");
  EXPECT_EQ(a.forward_count, 3);
  EXPECT_EQ(a.params, 10);
  ASSERT_EQ(a.outputs.size(), 1u);
  EXPECT_EQ(a.outputs[0].shape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(a.outputs[0].dtype, "torch.float32");
  EXPECT_EQ(a.outputs[0].device, "cpu");
  ASSERT_TRUE(a.outputs[0].stats.has_value());
  EXPECT_TRUE(a.outputs[0].stats->mean.has_value());
  ASSERT_TRUE(a.latency_ms.has_value());
  EXPECT_GE(*a.latency_ms, 0.0);
  // b's input is a's output: the same statistics.
  EXPECT_EQ(Layer(r, "b").inputs[0].stats, a.outputs[0].stats);
  EXPECT_GE(*Layer(r, "b").outputs[0].stats->min, 0.0);
  EXPECT_EQ(tracer_->steps(), 3);
  EXPECT_EQ(tracer_->hook_errors(), 0);
  EXPECT_FALSE(tracer_->nan_origin().has_value());
}

TEST_F(TracerTest, EachDistinctTensorIsReducedOncePerForward) {
  for (int i = 0; i < 2; ++i) {
    // Distinct tensors: x (root and a input), h (a output, b input), y (b output, root output).
    Forward(
        at::randn({4, 8}), [](const at::Tensor& x) { return x * 2; },
        [](const at::Tensor& h) { return at::relu(h); });
  }
  EXPECT_EQ(tracer_->tensor_reductions(), 6);
  // An identity layer (output is its input) reduces nothing new.
  at::Tensor x = at::randn({3});
  Tracer::CallId root = tracer_->BeginCall(Tracer::kNoLayer, true, {x});
  Tracer::CallId ca = tracer_->BeginCall(a_, false, {x});
  tracer_->EndCall(ca, {x});
  tracer_->EndCall(root, {x});
  EXPECT_EQ(tracer_->tensor_reductions(), 7);
}

TEST_F(TracerTest, InPlaceChangeInvalidatesCachedStats) {
  at::Tensor x = at::ones({16});
  Tracer::CallId root = tracer_->BeginCall(Tracer::kNoLayer, true, {x});
  Tracer::CallId ca = tracer_->BeginCall(a_, false, {x});
  at::Tensor h = x * 1;  // All ones.
  tracer_->EndCall(ca, {h});
  h.mul_(3);  // Same TensorImpl, new version.
  Tracer::CallId cb = tracer_->BeginCall(b_, false, {h});
  tracer_->EndCall(cb, {h});
  tracer_->EndCall(root, {h});
  const TraceRecord r = tracer_->Snapshot();
  EXPECT_DOUBLE_EQ(*Layer(r, "a").outputs[0].stats->mean, 1.0);
  EXPECT_DOUBLE_EQ(*Layer(r, "b").inputs[0].stats->mean, 3.0);
}

TEST_F(TracerTest, NanOriginIsFirstLayerWithFiniteInputs) {
  Forward(
      at::randn({4}), [](const at::Tensor& x) { return x * 1; },
      [](const at::Tensor& h) { return h + 1; });
  Forward(
      at::randn({4}), [](const at::Tensor& x) { return x * kNan; },
      [](const at::Tensor& h) { return h + 1; });
  const std::optional<NanOrigin> origin = tracer_->nan_origin();
  ASSERT_TRUE(origin.has_value());
  EXPECT_EQ(origin->layer, "a");
  EXPECT_EQ(origin->step, 1);
  EXPECT_TRUE(origin->is_nan);
  EXPECT_EQ(tracer_->Snapshot().metadata.nan_origin, origin);
}

TEST_F(TracerTest, NanOriginModelInput) {
  at::Tensor x = at::randn({4});
  x[2] = std::numeric_limits<double>::infinity();
  Forward(
      x, [](const at::Tensor& t) { return t * 1; }, [](const at::Tensor& h) { return h; });
  const std::optional<NanOrigin> origin = tracer_->nan_origin();
  ASSERT_TRUE(origin.has_value());
  EXPECT_EQ(origin->layer, NanOrigin::kModelInput);
  EXPECT_EQ(origin->step, 0);
  EXPECT_FALSE(origin->is_nan);
}

TEST_F(TracerTest, BackwardThroughGradFnHooks) {
  at::Tensor x = at::randn({3, 5}).requires_grad_(true);
  at::Tensor w = at::full({3, 5}, 2.0).requires_grad_(true);
  at::Tensor y = Forward(
      x, [&](const at::Tensor& t) { return t * w; },
      [](const at::Tensor& h) { return h.relu_(); });  // In place.
  y.sum().backward();
  const TraceRecord r = tracer_->Snapshot();
  const LayerTrace& a = Layer(r, "a");
  const LayerTrace& b = Layer(r, "b");
  EXPECT_EQ(a.backward_count, 1);
  EXPECT_EQ(b.backward_count, 1);
  ASSERT_TRUE(a.bwd_latency_ms.has_value());
  // d sum(relu(h)) / dh = (h > 0); dh/dx = w = 2.
  const at::Tensor mask = (y > 0).to(at::kDouble);
  EXPECT_NEAR(*b.grad_norm, std::sqrt(15.0), 1e-9);  // Gradient of ones at relu's output.
  EXPECT_NEAR(*b.grad_in_norm, mask.norm().item<double>(), 1e-9);
  EXPECT_NEAR(*a.grad_norm, mask.norm().item<double>(), 1e-9);
  EXPECT_NEAR(*a.grad_in_norm, (mask * 2).norm().item<double>(), 1e-9);
  EXPECT_TRUE(at::equal(x.grad(), mask.to(at::kFloat) * 2));
  EXPECT_FALSE(a.grad_has_nan);
  EXPECT_EQ(tracer_->hook_errors(), 0);
}

TEST_F(TracerTest, BackwardWithoutInputGradientEndsAtOutputNode) {
  at::Tensor w = at::randn({4}).requires_grad_(true);
  at::Tensor y = Forward(
      at::randn({4}), [&](const at::Tensor& t) { return t * w; },
      [](const at::Tensor& h) { return h * 0; });
  y.sum().backward();
  const TraceRecord r = tracer_->Snapshot();
  const LayerTrace& a = Layer(r, "a");
  EXPECT_EQ(a.backward_count, 1);
  EXPECT_FALSE(a.grad_in_norm.has_value());
  EXPECT_TRUE(a.has_zero_grad);  // b multiplies by zero.
  EXPECT_FALSE(Layer(r, "b").has_zero_grad);
}

TEST_F(TracerTest, StartTwiceIsFailedPreconditionAndRestartIsClean) {
  Forward(
      at::randn({2}), [](const at::Tensor& x) { return x + 1; },
      [](const at::Tensor& h) { return h; });
  EXPECT_EQ(tracer_->Start().code(), absl::StatusCode::kFailedPrecondition);
  tracer_->Stop();
  EXPECT_EQ(tracer_->BeginCall(a_, false, {at::ones({1})}), Tracer::kNoCall);
  ASSERT_TRUE(tracer_->Start().ok());
  EXPECT_TRUE(tracer_->Snapshot().layers.empty());
  EXPECT_EQ(tracer_->steps(), 0);
}

TEST_F(TracerTest, BackwardAfterStopIsIgnoredAndGradientsAreUnchanged) {
  at::Tensor x = at::randn({5}).requires_grad_(true);
  at::Tensor y = Forward(
      x, [](const at::Tensor& t) { return t * 3; }, [](const at::Tensor& h) { return h.exp(); });
  tracer_->Stop();
  y.sum().backward();
  EXPECT_TRUE(at::allclose(x.grad(), (x * 3).exp() * 3));
  EXPECT_EQ(tracer_->Snapshot().layers[0].backward_count, 0);
}

TEST_F(TracerTest, UndeclaredLayerCountsAHookError) {
  EXPECT_EQ(tracer_->BeginCall(99, false, {}), Tracer::kNoCall);
  EXPECT_EQ(tracer_->hook_errors(), 1);
  const TraceRecord r = tracer_->Snapshot();
  const std::vector<std::pair<std::string, std::string>> want = {{"hook_errors", "1"}};
  EXPECT_EQ(r.metadata.extra, want);
  tracer_->EndCall(Tracer::kNoCall, {});  // Ignored.
  tracer_->AbortCall(Tracer::kNoCall);
}

TEST_F(TracerTest, FinalizeRunsAnomalyDetection) {
  Forward(
      at::randn({4}), [](const at::Tensor& x) { return x * kNan; },
      [](const at::Tensor& h) { return h + 1; });
  absl::StatusOr<TraceRecord> r = tracer_->Finalize(12.5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->metadata.total_time_ms, 12.5);
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_EQ(r->warnings[0].severity, AnomalySeverity::kCritical);
  EXPECT_EQ(r->warnings[0].layer, "a");
}

TEST(TracerCreateTest, BadThresholdsAreInvalidArgument) {
  TracerOptions options;
  options.thresholds.exploding_variance_std = -1;
  EXPECT_EQ(Tracer::Create(options, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::agent
