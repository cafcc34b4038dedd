// The Tracer's flight recorder writes (agent/tracer.h, flight/layout.h): the position through a
// forward (nested calls, the root's end), the backward, the optimizer phase and Stop(); the spans
// of each call with their flags; the watch snapshot's extras.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/tracer.h"
#include "flight/reader.h"
#include "flight/recorder.h"

namespace tracetorch::agent {
namespace {

class TracerFlightTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tracer_ = *Tracer::Create(TracerOptions{}, TraceMetadata{});
    outer_ = *tracer_->DeclareLayer({"block", "Block", "net.block", 1, 0});
    recorder_ = *flight::Recorder::Create();
    tracer_->SetFlightRecorder(recorder_);  // Layers declared before are named too.
    inner_ = *tracer_->DeclareLayer({"fc", "Linear", "net.block.fc", 2, 10});
  }

  flight::RegionView Read() {
    absl::StatusOr<flight::RegionView> v = flight::ReadRegion(recorder_->data(), recorder_->size());
    EXPECT_TRUE(v.ok()) << v.status();
    return *v;
  }
  std::string Where() {
    flight::RegionView v = Read();
    return flight::Describe(v.position, v.names);
  }

  std::shared_ptr<Tracer> tracer_;
  std::shared_ptr<flight::Recorder> recorder_;
  Tracer::LayerId outer_ = 0;
  Tracer::LayerId inner_ = 0;
};

TEST_F(TracerFlightTest, FollowsTheForwardTheBackwardAndStop) {
  EXPECT_EQ(Where(), "step 0, idle");
  ASSERT_TRUE(tracer_->Start().ok());
  EXPECT_EQ(Where(), "step 0, outside");
  EXPECT_TRUE(Read().position.recording);

  const at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  at::Tensor y;
  for (int step = 0; step < 2; ++step) {
    const Tracer::CallId root = tracer_->BeginCall(Tracer::kNoLayer, /*is_root=*/true, {x});
    EXPECT_EQ(Where(), absl::StrCat("step ", step, ", forward, in the model's own code"));
    const Tracer::CallId block = tracer_->BeginCall(outer_, false, {x});
    const Tracer::CallId fc = tracer_->BeginCall(inner_, false, {x});
    EXPECT_EQ(Where(), absl::StrCat("step ", step, ", forward, in net.block.fc"));
    at::Tensor h = x * 2;
    tracer_->EndCall(fc, {h});
    EXPECT_EQ(Where(), absl::StrCat("step ", step, ", forward, in net.block"));  // Back out.
    y = h.relu();
    tracer_->EndCall(block, {y});
    tracer_->EndCall(root, {y});
    EXPECT_EQ(Where(), absl::StrCat("step ", step, ", outside"));
  }
  y.sum().backward();
  // Both calls end where x gets its gradient, the inner one first: after the outer one.
  EXPECT_EQ(Where(), "step 1, backward, after net.block");
  tracer_->MarkPhase(flight::Phase::kOptimizer);
  EXPECT_EQ(Where(), "step 1, optimizer");

  const flight::RegionView v = Read();
  EXPECT_EQ(v.position.steps, (std::vector<uint64_t>{0, 1}));
  // Forward spans of both calls of both steps, then the backward of step 1's calls.
  ASSERT_EQ(v.spans.size(), 6u);
  EXPECT_EQ(v.spans[0].layer, inner_);  // The inner call ends first.
  EXPECT_EQ(v.spans[1].layer, outer_);
  EXPECT_EQ(v.spans[0].kind, flight::SpanKind::kForward);
  EXPECT_GE(v.spans[1].duration_ns, v.spans[0].duration_ns);  // It encloses it...
  EXPECT_LE(v.spans[1].start_ns, v.spans[0].start_ns);        // ...from before it began.
  EXPECT_EQ(v.spans[3].step, 1u);
  EXPECT_EQ(v.spans[4].kind, flight::SpanKind::kBackward);
  EXPECT_EQ(v.spans[5].kind, flight::SpanKind::kBackward);
  EXPECT_EQ(v.spans[4].step, 1u);
  for (const flight::SpanView& s : v.spans) EXPECT_EQ(s.flags, 0u);

  tracer_->Stop();
  EXPECT_FALSE(Read().position.recording);
  EXPECT_EQ(Where(), "step 1, idle");
}

TEST_F(TracerFlightTest, ANonFiniteOutputFlagsItsSpan) {
  ASSERT_TRUE(tracer_->Start().ok());
  const at::Tensor x = at::randn({2, 2});
  const Tracer::CallId root = tracer_->BeginCall(Tracer::kNoLayer, true, {x});
  const Tracer::CallId fc = tracer_->BeginCall(inner_, false, {x});
  tracer_->EndCall(fc, {at::log(x - 10)});  // NaN.
  tracer_->EndCall(root, {x});
  const flight::RegionView v = Read();
  ASSERT_EQ(v.spans.size(), 1u);
  EXPECT_EQ(v.spans[0].flags, flight::kSpanNonFinite);
}

TEST_F(TracerFlightTest, AnAbortedCallMovesThePositionBackWithoutASpan) {
  ASSERT_TRUE(tracer_->Start().ok());
  const at::Tensor x = at::randn({2, 2});
  const Tracer::CallId root = tracer_->BeginCall(Tracer::kNoLayer, true, {x});
  const Tracer::CallId block = tracer_->BeginCall(outer_, false, {x});
  const Tracer::CallId fc = tracer_->BeginCall(inner_, false, {x});
  tracer_->AbortCall(fc);  // It raised.
  EXPECT_EQ(Where(), "step 0, forward, in net.block");
  tracer_->AbortCall(block);
  tracer_->EndCall(root, {x});
  EXPECT_TRUE(Read().spans.empty());
}

TEST_F(TracerFlightTest, WatchSnapshotSaysWhereAndWhetherItIsStalled) {
  TracerOptions options;
  options.stall_rule.floor = absl::Milliseconds(50);
  std::shared_ptr<Tracer> t = *Tracer::Create(options, TraceMetadata{});
  const Tracer::LayerId fc = *t->DeclareLayer({"fc", "Linear", "fc", 1, 10});
  t->SetFlightRecorder(recorder_);
  EXPECT_EQ(t->WatchSnapshot().metadata.FindExtra("flight_position"), nullptr);  // Not started.
  ASSERT_TRUE(t->Start().ok());
  const at::Tensor x = at::randn({2, 2});
  const Tracer::CallId root = t->BeginCall(Tracer::kNoLayer, true, {x});
  const Tracer::CallId call = t->BeginCall(fc, false, {x});
  TraceRecord r = t->WatchSnapshot();
  ASSERT_NE(r.metadata.FindExtra("flight_position"), nullptr);
  EXPECT_EQ(*r.metadata.FindExtra("flight_position"), "\"step 0, forward, in fc\"");
  EXPECT_EQ(*r.metadata.FindExtra("flight_stalled"), "false");
  absl::SleepFor(absl::Milliseconds(60));  // Past the floor without moving.
  r = t->WatchSnapshot();
  EXPECT_EQ(*r.metadata.FindExtra("flight_stalled"), "true");
  // Snapshot() (what an export holds) carries none of it.
  EXPECT_EQ(t->Snapshot().metadata.FindExtra("flight_position"), nullptr);
  t->EndCall(call, {x});
  t->EndCall(root, {x});
}

}  // namespace
}  // namespace tracetorch::agent
