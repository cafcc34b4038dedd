#include "trace/op_select.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trace/testing/op_graph_builders.h"

namespace tracetorch {
namespace {

using ::tracetorch::testing::Pass;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// root -> layer1 (conv, relu_) ; shared block called twice (conv each); add at the top.
OpGraph Graph() {
  OpGraph g;
  g.modules = {Pass("", "Net", 1, -1), Pass("layer1", "Seq", 1, 0),
               Pass("layer1.conv", "Conv2d", 1, 1), Pass("block", "Block", 1, 0),
               Pass("block", "Block", 2, 0)};
  auto op = [&](std::string func, int32_t call, int32_t pass, std::vector<int32_t> output_of) {
    OpNode n;
    n.func_name = func;
    n.call_index = call;
    n.index = static_cast<int32_t>(g.ops.size()) + 1;
    n.label = OpLabel(func, call, n.index);
    n.module_pass = pass;
    n.output_of = std::move(output_of);
    g.ops.push_back(std::move(n));
  };
  op("conv2d", 1, 2, {2});  // conv2d_1_1, output of layer1.conv
  op("relu_", 1, 1, {1});   // relu_1_2, output of layer1
  op("conv2d", 2, 3, {3});  // conv2d_2_3, output of block:1
  op("conv2d", 3, 4, {4});  // conv2d_3_4, output of block:2
  op("add", 1, 0, {0});     // add_1_5, the model's output
  return g;
}

std::vector<std::string> Selected(const OpSelector& s) {
  const OpGraph g = Graph();
  std::vector<std::string> out;
  for (int32_t i = 0; i < static_cast<int32_t>(g.ops.size()); ++i) {
    if (s.Matches(g, i)) out.push_back(g.ops[i].label);
  }
  return out;
}

TEST(OpSelector, Func) {
  EXPECT_THAT(Selected(OpSelector::Func("conv2d")),
              ElementsAre("conv2d_1_1", "conv2d_2_3", "conv2d_3_4"));
  EXPECT_THAT(Selected(OpSelector::Func("relu")), ElementsAre("relu_1_2"));  // In-place too.
  EXPECT_THAT(Selected(OpSelector::Func("relu_")), ElementsAre("relu_1_2"));
  EXPECT_THAT(Selected(OpSelector::Func("aten::add")), ElementsAre("add_1_5"));
  EXPECT_TRUE(Selected(OpSelector::Func("conv")).empty());
}

TEST(OpSelector, ModuleIsTheOutputOpOfAPass) {
  EXPECT_THAT(Selected(OpSelector::Module("layer1")), ElementsAre("relu_1_2"));
  EXPECT_THAT(Selected(OpSelector::Module("block")), ElementsAre("conv2d_2_3", "conv2d_3_4"));
  EXPECT_THAT(Selected(OpSelector::Module("block:2")), ElementsAre("conv2d_3_4"));
  EXPECT_THAT(Selected(OpSelector::Module("<root>")), ElementsAre("add_1_5"));
  EXPECT_TRUE(Selected(OpSelector::Module("layer")).empty());
}

TEST(OpSelector, InModuleIsEveryOpInsideNestedToo) {
  EXPECT_THAT(Selected(OpSelector::InModule("layer1")), ElementsAre("conv2d_1_1", "relu_1_2"));
  EXPECT_THAT(Selected(OpSelector::InModule("block:1")), ElementsAre("conv2d_2_3"));
  EXPECT_THAT(Selected(OpSelector::InModule("<root>")).size(), 5u);
}

TEST(OpSelector, Combinations) {
  const OpSelector convs = OpSelector::Func("conv2d");
  EXPECT_THAT(Selected(convs & OpSelector::InModule("block")),
              ElementsAre("conv2d_2_3", "conv2d_3_4"));
  EXPECT_THAT(Selected(convs & ~OpSelector::InModule("block")), ElementsAre("conv2d_1_1"));
  EXPECT_THAT(Selected(OpSelector::Label("add_1_5") | OpSelector::Module("layer1")),
              ElementsAre("relu_1_2", "add_1_5"));
  EXPECT_THAT(Selected(~OpSelector::All()), ElementsAre());
  EXPECT_THAT(Selected(OpSelector::None() | OpSelector::Label("conv2d_1_1")),
              ElementsAre("conv2d_1_1"));
}

TEST(OpSelector, KnowsWhenItNeedsModuleOutputs) {
  EXPECT_FALSE(OpSelector::Func("relu").NeedsModuleOutputs());
  EXPECT_FALSE((OpSelector::InModule("a") & ~OpSelector::Label("x")).NeedsModuleOutputs());
  EXPECT_TRUE((OpSelector::Func("relu") | ~OpSelector::Module("a")).NeedsModuleOutputs());
}

TEST(OpSelector, PrintsAndParsesBack) {
  const OpSelector s = (OpSelector::Func("conv2d") | OpSelector::Module("block:2")) &
                       ~OpSelector::InModule("layer1") & OpSelector::Label("it's");
  const std::string text = s.ToString();
  EXPECT_EQ(text, "(func('conv2d') | module('block:2')) & ~in_module('layer1') & label('it\\'s')");
  absl::StatusOr<OpSelector> back = OpSelector::Parse(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToString(), text);
  EXPECT_EQ(OpSelector::Module("<root>").ToString(), "module('<root>')");
}

TEST(OpSelector, ParseFollowsPrecedence) {
  absl::StatusOr<OpSelector> s =
      OpSelector::Parse(" func(\"conv2d\") | label('relu_1_2') & ~ all ");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(Selected(*s), ElementsAre("conv2d_1_1", "conv2d_2_3", "conv2d_3_4"));
  EXPECT_EQ(OpSelector::Parse("none")->ToString(), "none");
}

TEST(OpSelector, ParseErrorsSayWhere) {
  for (const char* bad : {"", "func", "func(conv2d)", "func('x'", "func('x') |", "(all", "foo('x')",
                          "all all", "func('unterminated)"}) {
    absl::StatusOr<OpSelector> s = OpSelector::Parse(bad);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.status().message(), HasSubstr("offset")) << bad;
  }
}

}  // namespace
}  // namespace tracetorch
