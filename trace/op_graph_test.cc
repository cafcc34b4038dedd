#include "trace/op_graph.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trace/testing/op_graph_builders.h"

namespace tracetorch {
namespace {

using ::tracetorch::testing::Pass;

using ::testing::ElementsAre;

// root -> block (called twice) -> conv; ops: conv2d, relu_ (in block:1), conv2d (block:2), add.
OpGraph TwoPassGraph() {
  OpGraph g;
  g.modules = {
      Pass("", "Net", 1, -1),
      Pass("block", "Block", 1, 0),
      Pass("block.conv", "Conv2d", 1, 1),
      Pass("block", "Block", 2, 0),
      Pass("block.conv", "Conv2d", 2, 3),
  };
  auto op = [&](std::string func, int32_t call, int32_t pass, std::vector<int32_t> parents) {
    OpNode n;
    n.func_name = func;
    n.call_index = call;
    n.index = static_cast<int32_t>(g.ops.size()) + 1;
    n.label = OpLabel(func, call, n.index);
    n.module_pass = pass;
    n.parents = std::move(parents);
    g.ops.push_back(std::move(n));
  };
  op("conv2d", 1, 2, {});
  op("relu_", 1, 1, {0});
  op("conv2d", 2, 4, {1});
  op("add", 1, 0, {0, 2});
  return g;
}

TEST(OpLabel, CountsPerFunctionAndOverallAndDropsTheInPlaceUnderscore) {
  EXPECT_EQ(OpLabel("conv2d", 1, 1), "conv2d_1_1");
  EXPECT_EQ(OpLabel("relu_", 2, 7), "relu_2_7");
  EXPECT_EQ(OpLabel("__and__", 1, 3), "__and___1_3");
  EXPECT_EQ(OpLabel("_", 1, 1), "__1_1");
}

TEST(OpGraph, AddressesNameRepeatedPassesOnly) {
  const OpGraph g = TwoPassGraph();
  EXPECT_EQ(g.ModuleAddress(0), "<root>");
  EXPECT_EQ(g.ModuleAddress(1), "block:1");
  EXPECT_EQ(g.ModuleAddress(4), "block.conv:2");
  EXPECT_EQ(g.ModuleAddress(9), "");
  EXPECT_EQ(g.PassCount("block"), 2);
  EXPECT_EQ(g.FindModulePass("block"), 1);
  EXPECT_EQ(g.FindModulePass("block:2"), 3);
  EXPECT_EQ(g.FindModulePass("block:3"), -1);
  EXPECT_EQ(g.FindModulePass("block:x"), -1);
  EXPECT_EQ(g.FindModulePass("<root>"), 0);
  EXPECT_EQ(g.FindModulePass(""), 0);
  EXPECT_EQ(g.FindModulePass("nope"), -1);
}

TEST(OpGraph, WithinFollowsParents) {
  const OpGraph g = TwoPassGraph();
  EXPECT_TRUE(g.Within(2, 1));
  EXPECT_TRUE(g.Within(2, 0));
  EXPECT_TRUE(g.Within(2, 2));
  EXPECT_FALSE(g.Within(2, 3));
  EXPECT_FALSE(g.Within(-1, 0));
}

TEST(OpGraph, FindOpAndLinkChildren) {
  OpGraph g = TwoPassGraph();
  LinkChildren(g);
  EXPECT_THAT(g.ops[0].children, ElementsAre(1, 3));
  EXPECT_THAT(g.ops[2].children, ElementsAre(3));
  EXPECT_TRUE(g.ops[3].children.empty());
  ASSERT_NE(g.FindOp("relu_1_2"), nullptr);
  EXPECT_EQ(g.FindOp("relu_1_2")->func_name, "relu_");
  EXPECT_EQ(g.FindOp("relu_1_3"), nullptr);
}

}  // namespace
}  // namespace tracetorch
