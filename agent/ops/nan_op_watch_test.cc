#include "agent/ops/nan_op_watch.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trace/op_graph_json.h"

namespace tracetorch::ops {
namespace {

// One "step": root forward -> block (linear, log, add) -> output. `shift` moves the log's input:
// a negative input gives a NaN born at the log inside the block, not at a module boundary.
at::Tensor Step(NanOpWatch& watch, int64_t step, const at::Tensor& x, const at::Tensor& w,
                double shift) {
  watch.BeginStep(step, {x});
  const int32_t block = watch.PushModule("block", "Block", {x}, w.numel());
  at::Tensor h = at::linear(x, w);
  at::Tensor l = at::log(h.abs() + shift);
  at::Tensor y = l + h;
  watch.PopModule(block, {y});
  at::Tensor out = y.sum();
  watch.EndStep({out});
  return out;
}

TEST(NanOpWatchTest, CleanStepsKeepNothingAndTheFirstNanStepIsKept) {
  const at::Tensor x = at::rand({2, 3}) + 0.5;
  const at::Tensor w = at::rand({4, 3}) + 0.5;
  NanOpWatch watch("Net", "Net");
  watch.AddParameter("block.weight", w, /*buffer=*/false);
  Step(watch, 0, x, w, 1.0);
  Step(watch, 1, x, w, 1.0);
  EXPECT_EQ(watch.kept(), nullptr);
  EXPECT_TRUE(watch.kept_json().empty());
  Step(watch, 2, x, w, -1000.0);  // log of a negative: NaN.
  ASSERT_NE(watch.kept(), nullptr);
  const OpGraph& g = *watch.kept();
  EXPECT_EQ(g.step, 2);
  ASSERT_TRUE(g.nan_origin.has_value());
  const OpNode& origin = g.ops[*g.nan_origin];
  EXPECT_EQ(origin.func_name, "log");
  EXPECT_EQ(g.ModuleAddress(origin.module_pass), "block");
  // No moments, only the counts.
  EXPECT_FALSE(origin.outputs[0].stats.has_value());
  ASSERT_TRUE(origin.outputs[0].nonfinite.has_value());
  EXPECT_GT(origin.outputs[0].nonfinite->nan_count, 0);
  EXPECT_EQ(g.params.size(), 1u);
  // The JSON is the op_graph_json document and reads back.
  absl::StatusOr<OpGraph> back = ParseOpGraphJson(watch.kept_json());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ops.size(), g.ops.size());
  EXPECT_EQ(back->nan_origin, g.nan_origin);
  // What a record takes: the same graph, shared; it outlives Reset().
  const std::shared_ptr<const OpGraph> shared = watch.kept_graph();
  EXPECT_EQ(shared.get(), watch.kept());

  NanOrigin o{"block", 2, true};
  ASSERT_TRUE(watch.Annotate(&o));
  EXPECT_EQ(o.op, origin.label);
  EXPECT_EQ(o.op_func, "log");
  EXPECT_EQ(o.op_module, "block");
  NanOrigin other{"block", 1, true};
  EXPECT_FALSE(watch.Annotate(&other));
  EXPECT_TRUE(other.op.empty());

  // Later steps are not recorded.
  const int64_t recorded = watch.recorded_steps();
  Step(watch, 3, x, w, -1000.0);
  EXPECT_EQ(watch.recorded_steps(), recorded);
  EXPECT_EQ(watch.kept()->step, 2);
  EXPECT_EQ(watch.hook_errors(), 0) << watch.first_error();

  watch.Reset();
  EXPECT_EQ(watch.kept(), nullptr);
  EXPECT_EQ(watch.kept_graph(), nullptr);
  EXPECT_EQ(shared->step, 2);
}

// One attention-like step: the causal mask's -inf go into the scores and softmax absorbs them.
// With `poison`, the block's output is multiplied by a NaN afterwards.
void MaskedStep(NanOpWatch& watch, int64_t step, const at::Tensor& x, bool poison) {
  watch.BeginStep(step, {x});
  const at::Tensor mask =
      at::triu(at::full({3, 3}, -std::numeric_limits<float>::infinity()), /*diagonal=*/1);
  const int32_t attn = watch.PushModule("attn", "Attention", {x, mask}, 0);
  at::Tensor scores = at::matmul(x, x.t()) + mask;
  at::Tensor y = at::matmul(at::softmax(scores, -1), x);
  if (poison) y = y * std::numeric_limits<float>::quiet_NaN();
  watch.PopModule(attn, {y});
  watch.EndStep({y});
}

TEST(NanOpWatchTest, MasksAbsorbedBySoftmaxAreCleanStepsAndRecordingGoesOn) {
  const at::Tensor x = at::rand({3, 4});
  NanOpWatch watch("Net", "Net");
  MaskedStep(watch, 0, x, /*poison=*/false);
  MaskedStep(watch, 1, x, /*poison=*/false);
  EXPECT_EQ(watch.kept(), nullptr);
  EXPECT_FALSE(watch.TakeReport(std::nullopt).has_value());
  MaskedStep(watch, 2, x, /*poison=*/true);
  ASSERT_NE(watch.kept(), nullptr);
  EXPECT_EQ(watch.kept()->step, 2);
  EXPECT_EQ(watch.recorded_steps(), 3);
  const OpGraph& g = *watch.kept();
  ASSERT_TRUE(g.nan_origin.has_value());
  EXPECT_EQ(g.ops[*g.nan_origin].func_name, "mul");  // Not the mask's full/triu/add.
}

// A step whose block guards a log with `where`: log(0) = -inf in the forward, absorbed; its
// backward would be 0 * inf = NaN.
void GuardedLogStep(NanOpWatch& watch, int64_t step, const at::Tensor& x, double shift) {
  watch.BeginStep(step, {x});
  const int32_t block = watch.PushModule("block", "Block", {x}, 0);
  at::Tensor h = x + shift;
  at::Tensor y = at::where(h > 0, at::log(h * (h > 0)), at::zeros_like(h));
  watch.PopModule(block, {y});
  watch.EndStep({y});
}

TEST(NanOpWatchTest, ABackwardOriginKeepsItsStepsGraphAndNamesTheAbsorbedOp) {
  const at::Tensor x = at::rand({2, 3}) - 0.5;  // Some h <= 0.
  NanOpWatch watch("Net", "Net");
  GuardedLogStep(watch, 0, x, 0.0);
  EXPECT_EQ(watch.kept(), nullptr);  // -inf absorbed: a clean step.
  NanOrigin forward{"block", 0, true};
  EXPECT_FALSE(watch.TakeReport(forward).has_value());  // Not a backward origin.
  GuardedLogStep(watch, 1, x, 0.0);
  NanOrigin backward{"block", 1, true};
  backward.backward = true;
  NanOrigin stale = backward;
  stale.step = 0;  // The watch holds step 1's graph only.
  EXPECT_FALSE(watch.TakeReport(stale).has_value());
  std::optional<std::optional<NanOrigin>> report = watch.TakeReport(backward);
  ASSERT_TRUE(report.has_value() && report->has_value());
  const NanOrigin& o = **report;
  EXPECT_EQ(o.layer, "block");
  EXPECT_EQ(o.step, 1);
  EXPECT_TRUE(o.backward);
  EXPECT_EQ(o.op_func, "log");
  EXPECT_EQ(o.op_module, "block");
  ASSERT_NE(watch.kept(), nullptr);
  EXPECT_EQ(watch.kept()->step, 1);
  EXPECT_FALSE(watch.TakeReport(backward).has_value());  // Reported once.
}

TEST(NanOpWatchTest, ANanAbsorbedInsideAModuleGivesItsOwnOrigin) {
  const at::Tensor x = -at::rand({2, 3}) - 0.5;  // log of a negative: NaN, dropped by `where`.
  NanOpWatch watch("Net", "Net");
  watch.BeginStep(0, {x});
  const int32_t block = watch.PushModule("block", "Block", {x}, 0);
  at::Tensor y = at::where(x > 0, at::log(x), at::zeros_like(x));
  watch.PopModule(block, {y});
  watch.EndStep({y});
  ASSERT_NE(watch.kept(), nullptr);  // A NaN is always trouble.
  std::optional<std::optional<NanOrigin>> report = watch.TakeReport(std::nullopt);
  ASSERT_TRUE(report.has_value() && report->has_value());
  EXPECT_EQ((*report)->layer, "block");
  EXPECT_EQ((*report)->op_func, "log");
  EXPECT_FALSE((*report)->backward);
}

TEST(NanOpWatchTest, NanInputKeepsTheGraphWithoutAnOriginOp) {
  at::Tensor x = at::rand({2, 3});
  x[0][0] = std::numeric_limits<float>::quiet_NaN();
  const at::Tensor w = at::rand({4, 3});
  NanOpWatch watch("Net", "Net");
  Step(watch, 0, x, w, 1.0);
  ASSERT_NE(watch.kept(), nullptr);
  EXPECT_FALSE(watch.kept()->nan_origin.has_value());
  NanOrigin o{std::string(NanOrigin::kModelInput), 0, true};
  EXPECT_FALSE(watch.Annotate(&o));
}

TEST(NanOpWatchTest, AbortedStepIsDroppedAndAnotherRecorderSkipsTheStep) {
  const at::Tensor x = at::rand({2, 3});
  const at::Tensor w = at::rand({4, 3});
  NanOpWatch watch("Net", "Net");
  watch.BeginStep(0, {x});
  EXPECT_TRUE(watch.recording());
  (void)at::log(-x);
  watch.AbortStep();
  EXPECT_FALSE(watch.recording());
  EXPECT_EQ(watch.kept(), nullptr);

  OpRecorder other(OpRecorderOptions{});
  ASSERT_TRUE(other.Start().ok());
  watch.BeginStep(1, {x});
  EXPECT_FALSE(watch.recording());
  EXPECT_EQ(watch.skipped_steps(), 1);
  EXPECT_EQ(watch.PushModule("block", "Block", {x}, 0), -1);
  other.Stop();
}

// The libtorch door's pattern: the step begins inside the first operator's start callback, and
// that operator is handed over to the watch (StartOp/EndOp at the same depth), once.
struct HandOver {
  NanOpWatch* watch = nullptr;
  at::Tensor input;
  int depth = 0;
  bool began = false;
  std::unique_ptr<at::ObserverContext> ctx;
};
thread_local HandOver* t_hand = nullptr;

std::unique_ptr<at::ObserverContext> HandStart(const at::RecordFunction& fn) {
  HandOver* h = t_hand;
  if (h == nullptr || h->depth++ > 0 || h->began) return nullptr;
  h->began = true;
  at::DisableRecordFunctionGuard quiet;
  h->watch->BeginStep(0, {h->input});
  h->ctx = h->watch->StartOp(fn);
  return nullptr;
}

void HandEnd(const at::RecordFunction& fn, at::ObserverContext* /*ctx*/) {
  HandOver* h = t_hand;
  if (h == nullptr || --h->depth > 0 || h->ctx == nullptr) return;
  at::DisableRecordFunctionGuard quiet;
  h->watch->EndOp(fn, std::move(h->ctx));
}

TEST(NanOpWatchTest, TheOperatorThatBeganTheStepIsHandedOverOnce) {
  const at::Tensor x = -at::ones({2, 3});
  const at::Tensor w = at::ones({4, 3});
  NanOpWatch watch("Net", "Net", "cpp");
  watch.AddParameter("fc.weight", w, /*buffer=*/false);
  HandOver hand;
  hand.watch = &watch;
  hand.input = x;
  t_hand = &hand;
  at::RecordFunctionCallback cb(&HandStart, &HandEnd);
  cb.needsInputs(true).needsOutputs(true).scopes({at::RecordScope::FUNCTION});
  const at::CallbackHandle handle = at::addThreadLocalCallback(cb);
  at::Tensor y = at::linear(x, w);  // Begins the step; addmm inside is not an op.
  at::Tensor z = at::log(y);        // Seen by the recorder's own callback: NaN.
  at::removeCallback(handle);
  t_hand = nullptr;
  watch.EndStep({z});
  ASSERT_NE(watch.kept(), nullptr);
  const OpGraph& g = *watch.kept();
  EXPECT_EQ(g.source, "cpp");
  ASSERT_EQ(g.ops.size(), 2u);
  EXPECT_EQ(g.ops[0].label, "linear_1_1");
  ASSERT_EQ(g.ops[0].inputs.size(), 2u);
  EXPECT_EQ(g.ops[0].inputs[0].source.kind, OpSource::Kind::kInput);
  EXPECT_EQ(g.ops[0].inputs[1].source.kind, OpSource::Kind::kParameter);
  EXPECT_EQ(g.ops[1].label, "log_1_2");
  EXPECT_EQ(g.ops[1].parents, (std::vector<int32_t>{0}));
  ASSERT_TRUE(g.nan_origin.has_value());
  EXPECT_EQ(*g.nan_origin, 1);
  const KeptOrigin k = watch.kept_origin();
  EXPECT_EQ(k.step, 0);
  EXPECT_TRUE(k.has_op);
  EXPECT_EQ(k.op, "log_1_2");
  EXPECT_EQ(k.op_module, "<root>");  // The root's own pass.
  EXPECT_EQ(watch.hook_errors(), 0) << watch.first_error();
}

}  // namespace
}  // namespace tracetorch::ops
