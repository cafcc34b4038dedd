#include "trace/op_audit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "trace/testing/op_graph_builders.h"

namespace tracetorch {
namespace {

using ::testing::HasSubstr;
using tracetorch::testing::Pass;

// x -> conv2d (block.conv) -> relu_ (block.act) -> max_pool2d -> log (NaN) -> sum.
OpGraph Graph() {
  OpGraph g;
  g.model_name = "Net";
  g.inputs.push_back({"x", TensorInfo{{1, 4}, "torch.float32", "cpu", TensorStats{}}});
  g.modules = {Pass("", "Net", 1, -1), Pass("block", "Block", 1, 0),
               Pass("block.conv", "Conv2d", 1, 1), Pass("block.act", "ReLU", 1, 1)};
  const auto op = [&](const std::string& func, int32_t pass, TensorStats stats) {
    OpNode n;
    n.func_name = func;
    n.index = static_cast<int32_t>(g.ops.size()) + 1;
    n.call_index = 1;
    n.label = OpLabel(func, 1, n.index);
    n.module_pass = pass;
    if (!g.ops.empty()) n.parents = {static_cast<int32_t>(g.ops.size()) - 1};
    n.outputs.push_back(TensorInfo{{1, 4}, "torch.float32", "cpu", stats});
    g.ops.push_back(n);
  };
  const TensorStats live{0.5, 1.0, -1.0, 2.0, 0, 0};
  const TensorStats zero{0.0, 0.0, 0.0, 0.0, 0, 0};
  op("conv2d", 2, live);
  op("relu_", 3, zero);
  op("max_pool2d", 1, zero);
  op("log", 0, TensorStats{std::nullopt, std::nullopt, std::nullopt, std::nullopt, 4, 0});
  op("sum", 0, TensorStats{std::nullopt, std::nullopt, std::nullopt, std::nullopt, 1, 0});
  g.nan_origin = 3;
  LinkChildren(g);
  return g;
}

TEST(OpAudit, FindsTheNanOriginAndTheDeadActivations) {
  const OpAuditReport r = AuditOpGraph(Graph());
  EXPECT_EQ(r.ops, 5);
  EXPECT_EQ(r.ops_with_stats, 5);
  ASSERT_TRUE(r.nan_origin.has_value());
  EXPECT_EQ(r.nan_origin->label, "log_1_4");
  EXPECT_EQ(r.nan_origin->module, "<root>");
  EXPECT_EQ(r.nan_origin->nan_count, 4);
  EXPECT_EQ(r.nonfinite_ops, 2);
  ASSERT_EQ(r.dead.size(), 2u);
  EXPECT_EQ(r.dead[0].label, "relu_1_2");
  EXPECT_EQ(r.dead[0].module, "block.act");
  EXPECT_EQ(r.dead[0].after, "relu_1_2");
  EXPECT_EQ(r.dead[1].label, "max_pool2d_1_3");
  EXPECT_EQ(r.dead[1].after, "relu_1_2");
  EXPECT_EQ(r.dead[1].zero_fraction, 1.0);
}

TEST(OpAudit, AnAllZeroOutputAwayFromActivationsIsNotDead) {
  OpGraph g = Graph();
  g.ops[1].func_name = "mul";  // zeros from a multiply: a mask, not a dead unit
  const OpAuditReport r = AuditOpGraph(g);
  EXPECT_TRUE(r.dead.empty());
}

TEST(OpAudit, ANonFiniteInputIsNamed) {
  OpGraph g = Graph();
  g.nan_origin.reset();
  g.inputs[0].tensor.stats->nan_count = 1;
  const OpAuditReport r = AuditOpGraph(g);
  EXPECT_FALSE(r.nan_origin.has_value());
  EXPECT_EQ(r.nan_input, "x");
  EXPECT_THAT(RenderOpAudit(r), HasSubstr("the input x"));
}

TEST(OpAudit, RendersAndSerialises) {
  const OpAuditReport r = AuditOpGraph(Graph());
  const std::string text = RenderOpAudit(r);
  EXPECT_THAT(text, HasSubstr("Audit of Net: 5 ops"));
  EXPECT_THAT(text, HasSubstr("non-finite origin  log_1_4 in <root> (log): NaN 4"));
  EXPECT_THAT(text, HasSubstr("relu_1_2 in block.act"));
  EXPECT_THAT(text, HasSubstr("100.0% zero  (after relu_1_2)"));
  const std::string json = OpAuditToJson(r, 0);
  EXPECT_THAT(json, HasSubstr("\"nan_origin\":{\"op\":3,\"label\":\"log_1_4\""));
  EXPECT_THAT(json, HasSubstr("\"nan_input\":null"));
  EXPECT_THAT(json, HasSubstr("\"after\":\"relu_1_2\""));
}

TEST(OpAudit, KnowsTheActivations) {
  EXPECT_TRUE(IsActivation("relu"));
  EXPECT_TRUE(IsActivation("relu_"));
  EXPECT_TRUE(IsActivation("gelu"));
  EXPECT_FALSE(IsActivation("conv2d"));
  EXPECT_FALSE(IsActivation("add_"));
}

}  // namespace
}  // namespace tracetorch
