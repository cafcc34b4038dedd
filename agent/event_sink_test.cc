// The Tracer's EventSink: every declaration, sample and NaN origin reaches the sink, with the
// step, and the embedded record does not depend on it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/variable.h>

#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/tracer.h"

namespace tracetorch::agent {
namespace {

// A fake that records what it receives.
class RecordingSink final : public EventSink {
 public:
  struct Sample {
    LayerId layer;
    int64_t step;
  };
  void OnLayerDeclared(LayerId layer, const LayerInfo& info) override {
    absl::MutexLock lock(&mu_);
    declared.emplace_back(layer, info.full_name);
  }
  void OnForward(LayerId layer, int64_t step, const ForwardSample& sample) override {
    absl::MutexLock lock(&mu_);
    forwards.push_back({layer, step});
    forward_output_shapes.push_back(sample.outputs.empty() ? std::vector<int64_t>{}
                                                           : sample.outputs[0].shape);
  }
  void OnBackward(LayerId layer, int64_t step, const BackwardSample& sample) override {
    absl::MutexLock lock(&mu_);
    backwards.push_back({layer, step});
    grad_norms.push_back(sample.grad_norm.value_or(-1));
  }
  void OnNanOrigin(const NanOrigin& origin) override {
    absl::MutexLock lock(&mu_);
    origins.push_back(origin);
  }

  absl::Mutex mu_;
  std::vector<std::pair<LayerId, std::string>> declared;
  std::vector<Sample> forwards;
  std::vector<std::vector<int64_t>> forward_output_shapes;
  std::vector<Sample> backwards;
  std::vector<double> grad_norms;
  std::vector<NanOrigin> origins;
};

class EventSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tracer_ = *Tracer::Create(TracerOptions{}, TraceMetadata{});
    a_ = *tracer_->DeclareLayer({"a", "Linear", "a", 1, 10});
    sink_ = std::make_shared<RecordingSink>();
    tracer_->SetEventSink(sink_);
    b_ = *tracer_->DeclareLayer({"b", "ReLU", "b", 1, 0});
    ASSERT_TRUE(tracer_->Start().ok());
  }

  at::Tensor Forward(const at::Tensor& x, const at::Tensor& w) {
    Tracer::CallId root = tracer_->BeginCall(Tracer::kNoLayer, /*is_root=*/true, {x});
    Tracer::CallId ca = tracer_->BeginCall(a_, false, {x});
    at::Tensor h = x * w;
    tracer_->EndCall(ca, {h});
    Tracer::CallId cb = tracer_->BeginCall(b_, false, {h});
    at::Tensor y = at::relu(h);
    tracer_->EndCall(cb, {y});
    tracer_->EndCall(root, {y});
    return y;
  }

  std::shared_ptr<Tracer> tracer_;
  std::shared_ptr<RecordingSink> sink_;
  Tracer::LayerId a_ = 0;
  Tracer::LayerId b_ = 0;
};

TEST_F(EventSinkTest, ReplaysEarlierLayersAndForwardsNewOnes) {
  ASSERT_EQ(sink_->declared.size(), 2u);
  EXPECT_EQ(sink_->declared[0], std::make_pair(a_, std::string("a")));
  EXPECT_EQ(sink_->declared[1], std::make_pair(b_, std::string("b")));
}

TEST_F(EventSinkTest, ForwardAndBackwardSamplesCarryTheirStep) {
  const at::Tensor w = at::full({2, 3}, 2.0).requires_grad_(true);
  for (int step = 0; step < 3; ++step) {
    at::Tensor x = at::randn({2, 3}).requires_grad_(true);
    Forward(x, w).sum().backward();
  }
  ASSERT_EQ(sink_->forwards.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(sink_->forwards[i].layer, i % 2 == 0 ? a_ : b_);
    EXPECT_EQ(sink_->forwards[i].step, static_cast<int64_t>(i / 2));
    EXPECT_EQ(sink_->forward_output_shapes[i], (std::vector<int64_t>{2, 3}));
  }
  ASSERT_EQ(sink_->backwards.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(sink_->backwards[i].step, static_cast<int64_t>(i / 2));
  // The embedded record saw the same samples.
  const TraceRecord r = tracer_->Snapshot();
  ASSERT_NE(r.FindLayer("a"), nullptr);
  EXPECT_EQ(r.FindLayer("a")->forward_count, 3);
  EXPECT_EQ(r.FindLayer("a")->backward_count, 3);
}

TEST_F(EventSinkTest, NanOriginIsReportedOnce) {
  const at::Tensor w = at::full({2, 3}, std::numeric_limits<float>::quiet_NaN());
  Forward(at::ones({2, 3}), w);
  Forward(at::ones({2, 3}), w);
  ASSERT_EQ(sink_->origins.size(), 1u);
  EXPECT_EQ(sink_->origins[0].layer, "a");
  EXPECT_EQ(sink_->origins[0].step, 0);
}

TEST_F(EventSinkTest, RemovedSinkReceivesNothingAndRecordIsUnchanged) {
  tracer_->SetEventSink(nullptr);
  Forward(at::ones({2, 3}), at::ones({2, 3}));
  EXPECT_TRUE(sink_->forwards.empty());
  EXPECT_EQ(tracer_->Snapshot().FindLayer("a")->forward_count, 1);
}

}  // namespace
}  // namespace tracetorch::agent
