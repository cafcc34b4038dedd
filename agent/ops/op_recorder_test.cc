#include "agent/ops/op_recorder.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace tracetorch::ops {
namespace {

std::vector<std::string> Labels(const OpGraph& g) {
  std::vector<std::string> out;
  for (const OpNode& op : g.ops) out.push_back(op.label);
  return out;
}

TEST(OpRecorderTest, RecordsTopLevelOpsWithDataFlow) {
  const at::Tensor x = at::randn({2, 4});
  const at::Tensor w = at::randn({3, 4});
  const at::Tensor b = at::randn({3});
  OpRecorder r(OpRecorderOptions{});
  r.AddInput("x", x);
  r.AddParameter("fc.weight", w, false);
  r.AddParameter("fc.bias", b, false);
  ASSERT_TRUE(r.Start().ok());
  at::Tensor y = at::linear(x, w, b);  // addmm inside: not an op.
  (void)y.size(0);                     // A metadata query: not an op.
  y.relu_();
  at::Tensor z = y + 1.5;
  r.SetOutputs({z});
  r.Stop();
  const OpGraph& g = r.graph();
  EXPECT_EQ(Labels(g), (std::vector<std::string>{"linear_1_1", "relu_1_2", "add_1_3"}));
  EXPECT_EQ(r.hook_errors(), 0) << r.first_error();
  ASSERT_EQ(g.params.size(), 2u);
  EXPECT_EQ(g.params[0].name, "fc.weight");
  const OpNode& linear = g.ops[0];
  EXPECT_EQ(linear.op_name, "aten::linear");
  EXPECT_EQ(linear.params, 12 + 3);
  ASSERT_EQ(linear.inputs.size(), 3u);
  EXPECT_EQ(linear.inputs[0].source.kind, OpSource::Kind::kInput);
  EXPECT_EQ(linear.inputs[1].arg, "weight");
  EXPECT_EQ(linear.inputs[1].source.kind, OpSource::Kind::kParameter);
  EXPECT_EQ(linear.children, (std::vector<int32_t>{1}));
  const OpNode& relu = g.ops[1];
  EXPECT_TRUE(relu.inplace);
  EXPECT_EQ(relu.parents, (std::vector<int32_t>{0}));
  const OpNode& add = g.ops[2];
  EXPECT_FALSE(add.inplace);
  EXPECT_EQ(add.parents, (std::vector<int32_t>{1}));
  EXPECT_EQ(add.op_name, "aten::add.Scalar");  // C++ `tensor + double`.
  ASSERT_EQ(add.args.size(), 2u);
  EXPECT_EQ(add.args[0].name, "other");
  EXPECT_EQ(add.args[0].value, "1.5");
  EXPECT_EQ(add.args[1].name, "alpha");
  EXPECT_EQ(add.args[1].value, "1");
  ASSERT_EQ(add.outputs.size(), 1u);
  ASSERT_TRUE(add.outputs[0].stats.has_value());
  EXPECT_NEAR(*add.outputs[0].stats->mean, z.mean().item<double>(), 1e-6);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0].kind, OpSource::Kind::kOp);
  EXPECT_EQ(g.outputs[0].index, 2);
}

TEST(OpRecorderTest, CopyOnWriteKeepsWhatEachOpProduced) {
  const at::Tensor x = at::randn({8}) - 5;  // Mostly negative.
  OpRecorder r(OpRecorderOptions{});
  r.AddInput("x", x);
  ASSERT_TRUE(r.Start().ok());
  at::Tensor y = x * 2;
  y.relu_();
  r.Stop();
  ASSERT_EQ(r.graph().ops.size(), 2u);
  ASSERT_EQ(r.saved(0).size(), 1u);
  EXPECT_TRUE(at::equal(r.saved(0)[0], x * 2));
  EXPECT_TRUE(at::equal(r.saved(1)[0], y));
  EXPECT_TRUE(r.graph().ops[0].saved);
}

TEST(OpRecorderTest, SaveSelectorAndModuleOutputs) {
  const at::Tensor x = at::randn({4});
  OpRecorderOptions options;
  options.save = OpSelector::Module("block");
  OpRecorder r(std::move(options));
  r.AddInput("x", x);
  ASSERT_TRUE(r.Start().ok());
  const int32_t root = r.PushModule("", "Net", {x}, 0);
  const int32_t block = r.PushModule("block", "Block", {x}, 0);
  at::Tensor a = x.sin();
  at::Tensor b = a.cos();
  r.PopModule(block, {b});
  at::Tensor c = b + x;
  r.PopModule(root, {c});
  r.Stop();
  const OpGraph& g = r.graph();
  ASSERT_EQ(g.ops.size(), 3u);
  EXPECT_EQ(g.modules.size(), 2u);
  EXPECT_EQ(g.ops[0].module_pass, block);
  EXPECT_EQ(g.ops[2].module_pass, root);
  EXPECT_EQ(g.ops[1].output_of, (std::vector<int32_t>{block}));
  EXPECT_EQ(g.ops[2].output_of, (std::vector<int32_t>{root}));
  EXPECT_EQ(g.modules[block].first_op, 0);
  EXPECT_EQ(g.modules[block].last_op, 1);
  EXPECT_TRUE(r.saved(0).empty());
  ASSERT_EQ(r.saved(1).size(), 1u);
  EXPECT_TRUE(at::equal(r.saved(1)[0], b));
  EXPECT_TRUE(r.saved(2).empty());
}

TEST(OpRecorderTest, InterventionReplacesTheOutputDownstream) {
  const at::Tensor x = at::ones({3});
  OpRecorderOptions options;
  options.intervene_sites = {OpSelector::Func("sin")};
  int calls = 0;
  options.intervene = [&](int32_t site, const at::Tensor& out) {
    ++calls;
    EXPECT_EQ(site, 0);
    return at::zeros_like(out);
  };
  OpRecorder r(std::move(options));
  ASSERT_TRUE(r.Start().ok());
  at::Tensor y = x.sin().exp();
  r.Stop();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(at::equal(y, at::ones({3})));  // exp(0)
  EXPECT_EQ(r.graph().ops.size(), 2u);       // zeros_like inside the intervention is not recorded.
}

TEST(OpRecorderTest, NanOriginIsTheFirstOpWithFiniteInputsAndANonFiniteOutput) {
  const at::Tensor x = at::ones({4});
  OpRecorder r(OpRecorderOptions{});
  r.AddInput("x", x);
  ASSERT_TRUE(r.Start().ok());
  at::Tensor y = x - 2;    // Finite.
  at::Tensor z = y.log();  // NaN enters here.
  at::Tensor w = z * 3;    // NaN in, NaN out: not the origin.
  r.Stop();
  ASSERT_TRUE(r.graph().nan_origin.has_value());
  EXPECT_EQ(r.graph().ops[*r.graph().nan_origin].label, "log_1_2");
  EXPECT_EQ(r.graph().ops[2].outputs[0].stats->nan_count, 4);

  at::Tensor bad = at::ones({2});
  bad[0] = std::numeric_limits<float>::infinity();
  OpRecorder from_input(OpRecorderOptions{});
  from_input.AddInput("bad", bad);
  ASSERT_TRUE(from_input.Start().ok());
  at::Tensor v = bad * 2;
  from_input.Stop();
  EXPECT_FALSE(from_input.graph().nan_origin.has_value());  // It came with the input.
}

OpRecorderOptions CountsOnly() {
  OpRecorderOptions o;
  o.save = OpSelector::None();
  o.nonfinite_only = true;
  return o;
}

NonFiniteCounts Counts(const OpNode& op) {
  EXPECT_FALSE(op.outputs.empty()) << op.label;
  if (op.outputs.empty() || !op.outputs[0].nonfinite) return NonFiniteCounts{-1, -1};
  return *op.outputs[0].nonfinite;
}

TEST(OpRecorderTest, CountsOnlyInfersFinitenessThroughPreservingOpsAndScansTheRest) {
  const at::Tensor x = at::rand({2, 3, 4, 4});
  const at::Tensor w = at::rand({5, 3, 3, 3});
  OpRecorder r(CountsOnly());
  r.AddInput("x", x);
  r.AddParameter("conv.weight", w, false);
  ASSERT_TRUE(r.Start().ok());
  at::Tensor h = at::conv2d(x, w);             // Scanned.
  at::Tensor p = at::max_pool2d(h.relu(), 2);  // Inferred: relu, max_pool2d.
  at::Tensor f = at::flatten(p, 1);            // Inferred.
  at::Tensor bad = at::log(f - 100);           // Scanned: NaN born here.
  at::Tensor still = at::relu(bad);            // A NaN input: scanned, the NaNs counted.
  at::Tensor wr = at::relu(w);                 // A parameter input: scanned.
  r.Stop();
  const OpGraph& g = r.graph();
  ASSERT_EQ(Labels(g),
            (std::vector<std::string>{"conv2d_1_1", "relu_1_2", "max_pool2d_1_3", "flatten_1_4",
                                      "sub_1_5", "log_1_6", "relu_2_7", "relu_3_8"}));
  for (const OpNode& op : g.ops) {
    ASSERT_FALSE(op.outputs.empty()) << op.label;
    EXPECT_FALSE(op.outputs[0].stats.has_value()) << op.label;  // Counts only.
  }
  for (int i : {0, 1, 2, 3, 4, 7}) EXPECT_EQ(Counts(g.ops[i]), NonFiniteCounts{}) << i;
  EXPECT_EQ(Counts(g.ops[5]).nan_count, f.numel());
  EXPECT_EQ(Counts(g.ops[6]).nan_count, f.numel());
  ASSERT_TRUE(g.nan_origin.has_value());
  EXPECT_EQ(g.ops[*g.nan_origin].label, "log_1_6");

  // The inference is what it says: a write the recorder did not see (recording disabled, the
  // documented limit) leaves a preserving op's inferred counts at zero, while a scanning op counts.
  const at::Tensor y = at::rand({4});
  OpRecorder unseen(CountsOnly());
  unseen.AddInput("y", y);
  ASSERT_TRUE(unseen.Start().ok());
  at::Tensor m = y * 2;
  {
    at::DisableRecordFunctionGuard hidden;
    m.fill_(std::numeric_limits<float>::quiet_NaN());
  }
  (void)at::relu(m);  // Inferred from mul's counts: {0, 0}.
  (void)(m + 1);      // Scanned: 4 NaNs.
  unseen.Stop();
  ASSERT_EQ(unseen.graph().ops.size(), 3u);
  EXPECT_EQ(Counts(unseen.graph().ops[1]), NonFiniteCounts{});
  // Every finite value (none) is zero: finite_all_zero holds vacuously; a NaN is trouble anyway.
  EXPECT_EQ(Counts(unseen.graph().ops[2]), (NonFiniteCounts{4, 0, 0, true}));

  // A NaN graph input: the preserving op that reads it is scanned, not inferred.
  at::Tensor nan_in = at::zeros({3});
  nan_in[1] = std::numeric_limits<float>::quiet_NaN();
  OpRecorder from_input(CountsOnly());
  from_input.AddInput("x", nan_in);
  ASSERT_TRUE(from_input.Start().ok());
  (void)at::relu(nan_in);
  from_input.Stop();
  ASSERT_EQ(from_input.graph().ops.size(), 1u);
  EXPECT_EQ(Counts(from_input.graph().ops[0]), (NonFiniteCounts{1, 0, 0, true}));
  EXPECT_FALSE(from_input.graph().nan_origin.has_value());
}

TEST(OpRecorderTest, OneRecorderPerThread) {
  OpRecorder a(OpRecorderOptions{});
  OpRecorder b(OpRecorderOptions{});
  ASSERT_TRUE(a.Start().ok());
  EXPECT_EQ(b.Start().code(), absl::StatusCode::kFailedPrecondition);
  a.Stop();
  EXPECT_TRUE(b.Start().ok());
  b.Stop();
}

}  // namespace
}  // namespace tracetorch::ops
