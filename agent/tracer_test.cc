#include "agent/tracer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/csrc/autograd/variable.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"

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
  // The record always carries its forward passes (none yet).
  const std::vector<std::pair<std::string, std::string>> want = {{"hook_errors", "1"},
                                                                 {"forward_passes", "0"}};
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

// A sink that breaks its contract ("must not throw"): the injected failure on every hook path.
class ThrowingSink final : public EventSink {
 public:
  std::atomic<int> forwards{0};
  std::atomic<int> backwards{0};
  void OnLayerDeclared(LayerId, const LayerInfo&) override {}
  void OnForward(LayerId, int64_t, const ForwardSample&) override {
    ++forwards;
    throw std::runtime_error("injected forward failure");
  }
  void OnBackward(LayerId, int64_t, const BackwardSample&) override {
    ++backwards;
    throw std::bad_alloc();  // What an allocation failure in a real sink would throw.
  }
  void OnNanOrigin(const NanOrigin&) override { throw 42; }  // Not even a std::exception.
};

int64_t MetadataHookErrors(const TraceRecord& r) {
  for (const auto& [key, value] : r.metadata.extra) {
    if (key == "hook_errors") return std::stoll(value);
  }
  return -1;
}

TEST_F(TracerTest, FailingHooksAreCountedAndNeverReachTheUser) {
  auto sink = std::make_shared<ThrowingSink>();
  tracer_->SetEventSink(sink);
  // Layer a: its input needs no gradient, so its backward ends in the node's post-hook
  // (OnNodeDone). Layer b: its input needs one, so it ends in a pre-hook (OnGradReady).
  at::Tensor w = at::full({4}, 3.0).requires_grad_(true);
  at::Tensor y;
  ASSERT_NO_THROW(y = Forward(
                      at::ones({4}), [&](const at::Tensor& t) { return t * w; },
                      [](const at::Tensor& h) { return h * kNan; }));
  EXPECT_EQ(sink->forwards.load(), 2);
  const int64_t forward_errors = tracer_->hook_errors();
  EXPECT_EQ(forward_errors, 3);  // Two forward samples and the NaN origin.
  ASSERT_NO_THROW(y.sum().backward());
  EXPECT_EQ(sink->backwards.load(), 2);
  EXPECT_EQ(tracer_->hook_errors(), forward_errors + 2);
  // The user's results are untouched, and what the Tracer records does not depend on the sink.
  EXPECT_TRUE(at::isnan(w.grad()).all().item<bool>());
  const TraceRecord r = tracer_->Snapshot();
  EXPECT_EQ(Layer(r, "a").forward_count, 1);
  EXPECT_EQ(Layer(r, "a").backward_count, 1);
  EXPECT_EQ(Layer(r, "b").backward_count, 1);
  ASSERT_TRUE(r.metadata.nan_origin.has_value());
  EXPECT_EQ(r.metadata.nan_origin->layer, "b");
  EXPECT_EQ(MetadataHookErrors(r), tracer_->hook_errors());
  // A new Start() counts from zero.
  tracer_->SetEventSink(nullptr);
  tracer_->Stop();
  ASSERT_TRUE(tracer_->Start().ok());
  EXPECT_EQ(tracer_->hook_errors(), 0);
}

TEST_F(TracerTest, FrontDoorsCountThroughTheSameGuard) {
  EXPECT_FALSE(guest::GuardHook(tracer_->errors(), "tracer_test_front_door",
                                [] { throw std::runtime_error("front door failure"); }));
  EXPECT_EQ(tracer_->hook_errors(), 1);
  EXPECT_EQ(MetadataHookErrors(tracer_->Snapshot()), 1);
}

// Blocks the Tracer inside its lock: OnForward is called with the Tracer's mutex held.
class BlockingSink final : public EventSink {
 public:
  absl::Notification entered;
  absl::Notification release;
  void OnLayerDeclared(LayerId, const LayerInfo&) override {}
  void OnForward(LayerId, int64_t, const ForwardSample&) override {
    if (!entered.HasBeenNotified()) entered.Notify();
    release.WaitForNotification();
  }
  void OnBackward(LayerId, int64_t, const BackwardSample&) override {}
  void OnNanOrigin(const NanOrigin&) override {}
};

// What the child of a fork sees, as bits of its exit code (0: all held).
int InertInForkedChild(Tracer& tracer, at::Tensor y, const at::Tensor& x) {
  int failed = 0;
  if (tracer.BeginCall(Tracer::kNoLayer, true, {x}) != Tracer::kNoCall) failed |= 1 << 0;
  if (tracer.Start().code() != absl::StatusCode::kFailedPrecondition) failed |= 1 << 1;
  if (tracer.DeclareLayer({"c", "T", "c", 1, 0}).status().code() !=
      absl::StatusCode::kFailedPrecondition) {
    failed |= 1 << 2;
  }
  const TraceRecord snapshot = tracer.Snapshot();
  if (!snapshot.layers.empty() || !snapshot.metadata.model_name.empty()) failed |= 1 << 3;
  if (tracer.Finalize(1.0).status().code() != absl::StatusCode::kFailedPrecondition) {
    failed |= 1 << 4;
  }
  if (tracer.active() || tracer.steps() != 0 || tracer.hook_errors() != 0 ||
      tracer.tensor_reductions() != 0 || tracer.nan_origin().has_value()) {
    failed |= 1 << 5;
  }
  // The backward hooks registered in the parent fire here and do nothing.
  y.sum().backward();
  if (!at::equal(x.grad(), at::full({4}, 2.0))) failed |= 1 << 6;
  tracer.SetEventSink(nullptr);
  tracer.SetMetadata(TraceMetadata{});
  tracer.Stop();
  return failed;
}

TEST_F(TracerTest, InertInAForkedChildEvenWhileTheParentHoldsItsLock) {
  at::Tensor x = at::ones({4}).requires_grad_(true);
  at::Tensor y = Forward(
      x, [](const at::Tensor& t) { return t * 2; }, [](const at::Tensor& h) { return h + 1; });
  auto sink = std::make_shared<BlockingSink>();
  tracer_->SetEventSink(sink);
  std::thread forward([&] {
    Forward(
        at::ones({2}), [](const at::Tensor& t) { return t * 3; },
        [](const at::Tensor& h) { return h; });
  });
  sink->entered.WaitForNotification();  // The other thread is inside the Tracer's lock.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);  // A deadlock fails the test (SIGALRM) instead of hanging it.
    _exit(InertInForkedChild(*tracer_, y, x));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  sink->release.Notify();
  forward.join();
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "failed checks (bits): " << WEXITSTATUS(status);
  // The parent goes on: both forwards and the steps are there.
  tracer_->SetEventSink(nullptr);
  EXPECT_EQ(tracer_->steps(), 2);
  EXPECT_EQ(Layer(tracer_->Snapshot(), "a").forward_count, 2);
}

// While a hook reduces a tensor, another thread's Snapshot() completes: statistics are computed
// without the Tracer's lock. The reduction waits (bounded) for the Snapshot; with the lock held
// it would time out instead.
class ReductionGate {
 public:
  // Called by TracerOptions::before_reduce.
  void BeforeReduce() {
    Phase* p = phase_.load();
    if (p == nullptr || p->reducing.HasBeenNotified()) return;
    p->reducing.Notify();
    if (!p->snapshot_done.WaitForNotificationWithTimeout(absl::Seconds(10))) p->timed_out = true;
  }
  // Runs `hook` while another thread takes a Snapshot() once the first reduction has begun;
  // true when that Snapshot() completed while the reduction waited.
  template <typename Hook>
  bool SnapshotDuring(Tracer& tracer, Hook hook) {
    Phase p;
    phase_.store(&p);
    std::thread snapshot([&] {
      if (!p.reducing.WaitForNotificationWithTimeout(absl::Seconds(10))) return;
      tracer.Snapshot();
      p.snapshot_done.Notify();
    });
    hook();
    phase_.store(nullptr);
    snapshot.join();
    return p.reducing.HasBeenNotified() && !p.timed_out;
  }

 private:
  struct Phase {
    absl::Notification reducing;
    absl::Notification snapshot_done;
    std::atomic<bool> timed_out{false};
  };
  std::atomic<Phase*> phase_{nullptr};
};

TEST(TracerLockTest, TensorsAndGradientsAreReducedWithoutTheTracersLock) {
  ReductionGate gate;
  TracerOptions options;
  options.before_reduce = [&gate](const at::Tensor&) { gate.BeforeReduce(); };
  std::shared_ptr<Tracer> tracer = *Tracer::Create(options, TraceMetadata{});
  const Tracer::LayerId a = *tracer->DeclareLayer({"a", "Linear", "a", 1, 0});
  ASSERT_TRUE(tracer->Start().ok());
  at::Tensor w = at::full({4}, 2.0).requires_grad_(true);
  at::Tensor x = at::ones({4});
  at::Tensor y;
  Tracer::CallId root = Tracer::kNoCall;
  Tracer::CallId call = Tracer::kNoCall;
  EXPECT_TRUE(gate.SnapshotDuring(*tracer, [&] {
    root = tracer->BeginCall(Tracer::kNoLayer, true, {x});
  })) << "BeginCall reduced its inputs under the lock";
  call = tracer->BeginCall(a, false, {x});
  y = x * w;
  EXPECT_TRUE(gate.SnapshotDuring(*tracer, [&] { tracer->EndCall(call, {y}); }))
      << "EndCall reduced its outputs under the lock";
  tracer->EndCall(root, {y});
  EXPECT_TRUE(gate.SnapshotDuring(*tracer, [&] { y.sum().backward(); }))
      << "the backward hook reduced the gradient under the lock";
  const TraceRecord r = tracer->Snapshot();
  ASSERT_NE(r.FindLayer("a"), nullptr);
  EXPECT_EQ(r.FindLayer("a")->forward_count, 1);
  EXPECT_EQ(r.FindLayer("a")->backward_count, 1);
  EXPECT_EQ(tracer->hook_errors(), 0);
}

TEST(TracerCreateTest, BadThresholdsAreInvalidArgument) {
  TracerOptions options;
  options.thresholds.exploding_variance_std = -1;
  EXPECT_EQ(Tracer::Create(options, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::agent
