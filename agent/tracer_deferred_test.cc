// The Tracer's deferred collection (TracerOptions::deferred_cpu): CPU samples take the route CUDA
// samples take (agent/pending_results.h), with completions the test finishes by hand, so that
// ordering, collection, the in-flight count, Stop()'s bounded wait and fork are checked on CPU.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/pending_results.h"
#include "agent/tracer.h"

namespace tracetorch::agent {
namespace {

// The fake device: every completion it makes finishes when the test says so.
class FakeDevice {
 public:
  class Work final : public Completion {
   public:
    explicit Work(std::shared_ptr<absl::Notification> done) : done_(std::move(done)) {}
    bool Done() override { return done_->HasBeenNotified(); }
    bool WaitUntil(absl::Time deadline) override {
      return done_->WaitForNotificationWithDeadline(deadline);
    }

   private:
    std::shared_ptr<absl::Notification> done_;
  };

  std::unique_ptr<Completion> Make() {
    auto done = std::make_shared<absl::Notification>();
    absl::MutexLock lock(&mu_);
    work_.push_back(done);
    return std::make_unique<Work>(std::move(done));
  }
  // Finishes the work of the i-th sample made (in call order).
  void Finish(size_t i) {
    absl::MutexLock lock(&mu_);
    if (!work_[i]->HasBeenNotified()) work_[i]->Notify();
  }
  size_t made() {
    absl::MutexLock lock(&mu_);
    return work_.size();
  }

 private:
  absl::Mutex mu_;
  std::vector<std::shared_ptr<absl::Notification>> work_ ABSL_GUARDED_BY(mu_);
};

class TracerDeferredTest : public ::testing::Test {
 protected:
  void Make(TracerOptions options) {
    options.deferred_cpu = true;
    tracer_ = *Tracer::Create(std::move(options), TraceMetadata{});
    a_ = *tracer_->DeclareLayer({"a", "Linear", "a", 1, 10});
    b_ = *tracer_->DeclareLayer({"b", "ReLU", "b", 1, 0});
    ASSERT_TRUE(tracer_->Start().ok());
  }
  void MakeOnFakeDevice(TracerOptions options = {}) {
    options.cpu_completion = [this] { return device_.Make(); };
    Make(std::move(options));
  }

  // One step: root(x) -> a -> b; the samples of a then b are deferred.
  void Step(const at::Tensor& x) {
    Tracer::CallId root = tracer_->BeginCall(Tracer::kNoLayer, /*is_root=*/true, {x});
    Tracer::CallId ca = tracer_->BeginCall(a_, false, {x});
    at::Tensor h = x * 2;
    tracer_->EndCall(ca, {h});
    Tracer::CallId cb = tracer_->BeginCall(b_, false, {h});
    at::Tensor y = at::relu(h);
    tracer_->EndCall(cb, {y});
    tracer_->EndCall(root, {y});
  }

  // A layer with no sample yet is not in the record: 0.
  static int64_t Forwards(const TraceRecord& r, const char* name) {
    const LayerTrace* l = r.FindLayer(name);
    return l == nullptr ? 0 : l->forward_count;
  }
  static std::string Extra(const TraceRecord& r, const char* key) {
    const std::string* v = r.metadata.FindExtra(key);
    return v == nullptr ? "<none>" : *v;
  }

  FakeDevice device_;
  std::shared_ptr<Tracer> tracer_;
  Tracer::LayerId a_ = 0;
  Tracer::LayerId b_ = 0;
};

TEST_F(TracerDeferredTest, SamplesReachTheRecordInCallOrderWhenTheirWorkHasFinished) {
  MakeOnFakeDevice();
  Step(at::randn({4, 8}));
  Step(at::randn({4, 8}));
  ASSERT_EQ(device_.made(), 4u);  // a0 b0 a1 b1.
  TraceRecord r = tracer_->Snapshot();
  EXPECT_EQ(Forwards(r, "a"), 0);
  EXPECT_EQ(Extra(r, "results_in_flight"), "4");
  EXPECT_EQ(tracer_->results_in_flight(), 4);

  device_.Finish(1);  // b0 finished, a0 not: b0 waits behind a0.
  r = tracer_->Snapshot();
  EXPECT_EQ(Forwards(r, "b"), 0);
  EXPECT_EQ(Extra(r, "results_in_flight"), "4");

  device_.Finish(0);
  r = tracer_->Snapshot();
  EXPECT_EQ(Forwards(r, "a"), 1);
  EXPECT_EQ(Forwards(r, "b"), 1);
  EXPECT_EQ(Extra(r, "results_in_flight"), "2");
  ASSERT_EQ(r.FindLayer("a")->outputs.size(), 1u);
  EXPECT_TRUE(r.FindLayer("a")->outputs[0].stats.has_value());

  device_.Finish(2);
  device_.Finish(3);
  r = tracer_->Snapshot();
  EXPECT_EQ(Forwards(r, "a"), 2);
  EXPECT_EQ(Forwards(r, "b"), 2);
  EXPECT_EQ(Extra(r, "results_in_flight"), "0");
  EXPECT_EQ(Extra(r, "results_abandoned"), "0");
  EXPECT_EQ(tracer_->hook_errors(), 0);
}

TEST_F(TracerDeferredTest, TheNextStepCollectsWhatHasFinished) {
  Make({});  // ReadyCompletion: finished at once, collected by the next step.
  Step(at::randn({2, 3}));
  EXPECT_EQ(tracer_->results_in_flight(), 2);
  Step(at::randn({2, 3}));  // Its root call collects the first step's samples.
  EXPECT_EQ(tracer_->results_in_flight(), 2);
  const TraceRecord r = tracer_->Snapshot();
  EXPECT_EQ(Forwards(r, "a"), 2);
  EXPECT_EQ(tracer_->results_in_flight(), 0);
}

TEST_F(TracerDeferredTest, StatisticsAndNanOriginAreKnownOnceCollected) {
  MakeOnFakeDevice();
  Tracer::CallId root = tracer_->BeginCall(Tracer::kNoLayer, true, {at::ones({3})});
  Tracer::CallId ca = tracer_->BeginCall(a_, false, {at::ones({3})});
  tracer_->EndCall(ca, {at::full({3}, std::numeric_limits<float>::quiet_NaN())});
  tracer_->EndCall(root, {});
  // The hook decided nothing: the statistics are "on the device".
  EXPECT_FALSE(tracer_->nan_origin().has_value());
  EXPECT_EQ(Forwards(tracer_->Snapshot(), "a"), 0);
  device_.Finish(0);
  const TraceRecord r = tracer_->Snapshot();
  ASSERT_TRUE(r.metadata.nan_origin.has_value());
  EXPECT_EQ(r.metadata.nan_origin->layer, "a");
  EXPECT_EQ(r.metadata.nan_origin->step, 0);
  EXPECT_TRUE(r.metadata.nan_origin->is_nan);
  ASSERT_EQ(r.FindLayer("a")->outputs.size(), 1u);
  ASSERT_TRUE(r.FindLayer("a")->outputs[0].stats.has_value());
  EXPECT_EQ(r.FindLayer("a")->outputs[0].stats->nan_count, 3);
  EXPECT_DOUBLE_EQ(*r.FindLayer("a")->inputs[0].stats->mean, 1.0);
}

TEST_F(TracerDeferredTest, NanOriginIsTheEarliestInForwardOrderWhateverFinishesFirst) {
  MakeOnFakeDevice();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Step(at::randn({2, 3}));  // Step 0: finite (work 0, 1).
  // Step 1: a's input is finite, its output NaN (work 2).
  Tracer::CallId root = tracer_->BeginCall(Tracer::kNoLayer, true, {at::ones({2})});
  Tracer::CallId ca = tracer_->BeginCall(a_, false, {at::ones({2})});
  at::Tensor h = at::full({2}, nan);
  tracer_->EndCall(ca, {h});
  tracer_->EndCall(root, {h});
  Step(at::full({2, 3}, nan));  // Step 2: a NaN model input, a later origin (work 3, 4).
  ASSERT_EQ(device_.made(), 5u);
  device_.Finish(4);  // The last work finishes first: nothing leaves before step 0's.
  device_.Finish(3);
  EXPECT_FALSE(tracer_->Snapshot().metadata.nan_origin.has_value());
  for (size_t i = 0; i < 3; ++i) device_.Finish(i);
  const std::optional<NanOrigin> origin = tracer_->Snapshot().metadata.nan_origin;
  ASSERT_TRUE(origin.has_value());
  EXPECT_EQ(origin->layer, "a");
  EXPECT_EQ(origin->step, 1);
  EXPECT_EQ(tracer_->nan_origin(), origin);
}

TEST_F(TracerDeferredTest, ModelInputIsTheOriginAtCollection) {
  Make({});  // Ready at once; collected by the next Snapshot().
  at::Tensor x = at::randn({4});
  x[1] = std::numeric_limits<float>::infinity();
  Step(x);
  EXPECT_FALSE(tracer_->nan_origin().has_value());
  const std::optional<NanOrigin> origin = tracer_->Snapshot().metadata.nan_origin;
  ASSERT_TRUE(origin.has_value());
  EXPECT_EQ(origin->layer, NanOrigin::kModelInput);
  EXPECT_FALSE(origin->is_nan);
}

TEST_F(TracerDeferredTest, ValueFromBetweenModulesNamesTheFirstLayerThatSawIt) {
  Make({});
  // c contains b; c sees the NaN first (in call order) though b ends first.
  const Tracer::LayerId c = *tracer_->DeclareLayer({"c", "Seq", "c", 1, 0});
  at::Tensor x = at::ones({3});
  Tracer::CallId root = tracer_->BeginCall(Tracer::kNoLayer, true, {x});
  Tracer::CallId ca = tracer_->BeginCall(a_, false, {x});
  at::Tensor h = x * 2;
  tracer_->EndCall(ca, {h});
  at::Tensor bad = h * std::numeric_limits<float>::quiet_NaN();  // Code between modules.
  Tracer::CallId cc = tracer_->BeginCall(c, false, {bad});
  Tracer::CallId cb = tracer_->BeginCall(b_, false, {bad});
  at::Tensor y = at::relu(bad);
  tracer_->EndCall(cb, {y});
  tracer_->EndCall(cc, {y});
  tracer_->EndCall(root, {y});
  const std::optional<NanOrigin> origin = tracer_->Snapshot().metadata.nan_origin;
  ASSERT_TRUE(origin.has_value());
  EXPECT_EQ(origin->layer, "c");
  EXPECT_EQ(origin->step, 0);
}

TEST_F(TracerDeferredTest, ATensorSeenAgainInOneForwardIsReducedOnce) {
  Make({});
  Step(at::randn({4, 8}));  // x (root, a), h (a, b), y (b, root): three tensors.
  EXPECT_EQ(tracer_->tensor_reductions(), 3);
  const TraceRecord r = tracer_->Snapshot();
  ASSERT_TRUE(r.FindLayer("b")->inputs[0].stats.has_value());
  EXPECT_EQ(r.FindLayer("b")->inputs[0].stats, r.FindLayer("a")->outputs[0].stats);
}

TEST_F(TracerDeferredTest, GradientStatisticsAreCollectedLater) {
  Make({});
  at::Tensor w = at::full({4}, 3.0).requires_grad_(true);
  at::Tensor x = at::ones({4}).requires_grad_(true);
  Tracer::CallId root = tracer_->BeginCall(Tracer::kNoLayer, true, {x});
  Tracer::CallId ca = tracer_->BeginCall(a_, false, {x});
  at::Tensor h = x * w;
  tracer_->EndCall(ca, {h});
  tracer_->EndCall(root, {h});
  h.sum().backward();
  EXPECT_GE(tracer_->results_in_flight(), 2);  // a's forward and its backward.
  const TraceRecord r = tracer_->Snapshot();
  EXPECT_EQ(tracer_->results_in_flight(), 0);
  const LayerTrace* a = r.FindLayer("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->backward_count, 1);
  ASSERT_TRUE(a->grad_norm.has_value());
  EXPECT_DOUBLE_EQ(*a->grad_norm, 2.0);  // d(sum)/dh = ones(4): norm 2.
  EXPECT_EQ(tracer_->hook_errors(), 0);
}

TEST_F(TracerDeferredTest, StopCollectsWorkThatFinishesWhileItWaits) {
  TracerOptions options;
  options.stop_wait = absl::InfiniteDuration();  // The handshake ends the wait, not a clock.
  MakeOnFakeDevice(options);
  Step(at::randn({2, 3}));
  // The device finishes once Stop() is waiting (or before: either way Stop() collects).
  std::thread device([&] {
    device_.Finish(0);
    device_.Finish(1);
  });
  tracer_->Stop();
  device.join();
  const TraceRecord r = tracer_->Snapshot();
  EXPECT_EQ(Forwards(r, "a"), 1);
  EXPECT_EQ(Forwards(r, "b"), 1);
  EXPECT_EQ(Extra(r, "results_in_flight"), "0");
  EXPECT_EQ(Extra(r, "results_abandoned"), "0");
}

TEST_F(TracerDeferredTest, StopGivesUpAfterItsBoundedWaitAndCountsWhatItDropped) {
  TracerOptions options;
  options.stop_wait = absl::ZeroDuration();  // A hung device: nothing finishes.
  MakeOnFakeDevice(options);
  Step(at::randn({2, 3}));
  device_.Finish(0);  // a finished; b never does.
  tracer_->Stop();
  const TraceRecord r = tracer_->Snapshot();
  EXPECT_EQ(Forwards(r, "a"), 1);
  EXPECT_EQ(Forwards(r, "b"), 0);
  EXPECT_EQ(Extra(r, "results_in_flight"), "0");
  EXPECT_EQ(Extra(r, "results_abandoned"), "1");
  EXPECT_EQ(tracer_->hook_errors(), 1);
  // A new session starts clean.
  ASSERT_TRUE(tracer_->Start().ok());
  EXPECT_EQ(tracer_->results_in_flight(), 0);
  EXPECT_EQ(Extra(tracer_->Snapshot(), "results_abandoned"), "<none>");
}

TEST_F(TracerDeferredTest, InertInAForkedChildWithSamplesInFlight) {
  MakeOnFakeDevice();
  Step(at::randn({2, 3}));
  ASSERT_EQ(tracer_->results_in_flight(), 2);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);  // A deadlock fails the test (SIGALRM) instead of hanging it.
    int failed = 0;
    if (tracer_->results_in_flight() != 0) failed |= 1;
    if (!tracer_->Snapshot().layers.empty()) failed |= 2;
    tracer_->Stop();  // Returns at once: no wait on the parent's device work.
    if (tracer_->BeginCall(a_, true, {at::ones({1})}) != Tracer::kNoCall) failed |= 4;
    _exit(failed);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "failed checks (bits): " << WEXITSTATUS(status);
  // The parent's samples are still there, collected once finished.
  device_.Finish(0);
  device_.Finish(1);
  EXPECT_EQ(Forwards(tracer_->Snapshot(), "b"), 1);
}

}  // namespace
}  // namespace tracetorch::agent
