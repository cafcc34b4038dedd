#include "draw/op_graph_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "draw/testing/net_graph.h"
#include "trace/op_graph.h"

namespace tracetorch::draw {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using testing_net::FromOp;
using testing_net::NetBuilder;

int Count(const OpGraphView& v, ViewNode::Kind kind) {
  int n = 0;
  for (const ViewNode& node : v.nodes) n += node.kind == kind ? 1 : 0;
  return n;
}

std::vector<std::string> Titles(const OpGraphView& v) {
  std::vector<std::string> out;
  for (const ViewNode& n : v.nodes) out.push_back(n.title);
  return out;
}

TEST(OpGraphView, NoneDrawsEveryOpWithTheBlocksAsNestedClusters) {
  const NetBuilder net;
  ViewOptions o;
  o.collapse = Collapse::kNone;
  absl::StatusOr<OpGraphView> v = BuildOpGraphView(net.g, o);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Count(*v, ViewNode::Kind::kOp), 11);
  EXPECT_EQ(Count(*v, ViewNode::Kind::kInput), 1);
  EXPECT_EQ(Count(*v, ViewNode::Kind::kOutput), 1);
  // layer1, layer1.0, layer1.1; the one-op passes name their op instead of a cluster.
  ASSERT_EQ(v->clusters.size(), 3u);
  EXPECT_EQ(v->clusters[0].title, "layer1: Sequential");
  EXPECT_EQ(v->clusters[1].parent, 0);
  EXPECT_EQ(v->clusters[2].parent, 0);
  EXPECT_THAT(Titles(*v), Contains("add_1_5"));
  EXPECT_THAT(Titles(*v), Contains("add_2_9"));
  EXPECT_EQ(v->nodes[1].title, "conv2d_1_1");  // After the input.
  EXPECT_THAT(v->nodes[1].detail, HasSubstr("conv1"));
  // 5 + 5 into and inside the blocks (residuals too), x -> conv, -> flatten, -> fc, -> output.
  EXPECT_EQ(v->edges.size(), 14u);
}

TEST(OpGraphView, MaxDrawsEachTopLevelModuleAsOneBox) {
  const NetBuilder net;
  ViewOptions o;
  o.collapse = Collapse::kMax;
  absl::StatusOr<OpGraphView> v = BuildOpGraphView(net.g, o);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Count(*v, ViewNode::Kind::kModule), 3);  // conv1, layer1, fc
  EXPECT_EQ(Count(*v, ViewNode::Kind::kOp), 1);      // flatten, run by the root itself
  EXPECT_TRUE(v->clusters.empty());
  EXPECT_EQ(v->collapse_depth, 1);
  EXPECT_EQ(v->edges.size(), 5u);  // x -> conv1 -> layer1 -> flatten -> fc -> output
}

TEST(OpGraphView, AutoKeepsEveryOpWhenTheGraphFits) {
  const NetBuilder net;
  absl::StatusOr<OpGraphView> v = BuildOpGraphView(net.g, ViewOptions{});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->collapse_depth, -1);
  EXPECT_EQ(Count(*v, ViewNode::Kind::kOp), 11);
}

TEST(OpGraphView, AutoCollapsesAndFoldsIdenticalBlocksWhenOverBudget) {
  const NetBuilder net;
  ViewOptions o;
  o.max_nodes = 8;
  absl::StatusOr<OpGraphView> v = BuildOpGraphView(net.g, o);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->collapse_depth, 2);
  ASSERT_EQ(Count(*v, ViewNode::Kind::kFolded), 1);
  EXPECT_EQ(v->folded, 1);
  for (const ViewNode& n : v->nodes) {
    if (n.kind != ViewNode::Kind::kFolded) continue;
    EXPECT_EQ(n.title, "layer1.0 … layer1.1");
    EXPECT_THAT(n.detail, HasSubstr("BasicBlock ×2"));
    EXPECT_EQ(n.repeat, 2);
    EXPECT_EQ(n.ops.size(), 8u);
  }
  EXPECT_EQ(v->nodes.size(), 6u);  // x, conv2d_1_1, the fold, flatten, linear, output
}

TEST(OpGraphView, AutoDrawsTheFirstFoldedBlockOpenWhenThereIsRoom) {
  const NetBuilder net;
  ViewOptions o;
  o.max_nodes = 10;
  absl::StatusOr<OpGraphView> v = BuildOpGraphView(net.g, o);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->collapse_depth, 2);
  // layer1.0 open (its conv1, relu, conv2 as boxes, its residual add itself), layer1.1 a box:
  // the rest of a run of two is one block, nothing to fold.
  ASSERT_EQ(v->clusters.size(), 2u);
  EXPECT_EQ(v->clusters[0].title, "layer1: Sequential");
  EXPECT_EQ(v->clusters[1].title, "layer1.0: BasicBlock");
  EXPECT_THAT(Titles(*v), Contains("add_1_5"));
  EXPECT_THAT(Titles(*v), Contains("layer1.0.relu"));
  EXPECT_THAT(Titles(*v), Contains("layer1.1"));
  EXPECT_EQ(Count(*v, ViewNode::Kind::kFolded), 0);
  EXPECT_EQ(v->nodes.size(), 10u);
}

TEST(OpGraphView, BlocksFedByAnythingButThePreviousOneDoNotFold) {
  NetBuilder net;
  // layer1.1 reads the stem conv too: folding would hide that edge.
  net.g.modules[7].inputs.push_back(FromOp(0));
  ViewOptions o;
  o.max_nodes = 8;
  absl::StatusOr<OpGraphView> v = BuildOpGraphView(net.g, o);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Count(*v, ViewNode::Kind::kFolded), 0);
}

TEST(OpGraphView, ModuleDrawsThePassWithItsBoundary) {
  const NetBuilder net;
  ViewOptions o;
  o.collapse = Collapse::kNone;
  o.module = "layer1.1";
  absl::StatusOr<OpGraphView> v = BuildOpGraphView(net.g, o);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Count(*v, ViewNode::Kind::kOp), 4);
  ASSERT_EQ(Count(*v, ViewNode::Kind::kInput), 1);  // add_1_5, from layer1.0
  EXPECT_THAT(Titles(*v), Contains("add_1_5"));
  EXPECT_EQ(Count(*v, ViewNode::Kind::kOutput), 1);
  EXPECT_TRUE(v->clusters.empty());

  o.module = "layer9";
  EXPECT_EQ(BuildOpGraphView(net.g, o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OpGraphView, MarksNonFiniteAndDeadOutputs) {
  NetBuilder net;
  net.g.ops[2].outputs[0].stats = TensorStats{0.0, 0.0, 0.0, 0.0, 0, 0};  // relu: all zero
  net.g.ops[5].outputs[0].stats->nan_count = 3;                           // layer1.1.conv1
  net.g.nan_origin = 5;
  ViewOptions o;
  o.collapse = Collapse::kNone;
  absl::StatusOr<OpGraphView> v = BuildOpGraphView(net.g, o);
  ASSERT_TRUE(v.ok()) << v.status();
  for (const ViewNode& n : v->nodes) {
    if (n.title == "relu_1_3") {
      EXPECT_EQ(n.mark, Mark::kDead);
      EXPECT_EQ(n.mark_text, "dead (all zero)");
    } else if (n.title == "conv2d_4_6") {
      EXPECT_EQ(n.mark, Mark::kNonFinite);
      EXPECT_EQ(n.mark_text, "NaN origin: NaN 3");
    } else {
      EXPECT_EQ(n.mark, Mark::kNone) << n.title;
    }
  }
  o.collapse = Collapse::kMax;
  v = BuildOpGraphView(net.g, o);
  ASSERT_TRUE(v.ok()) << v.status();
  bool seen = false;
  for (const ViewNode& n : v->nodes) {
    if (n.title != "layer1") continue;
    seen = true;
    EXPECT_EQ(n.mark, Mark::kNonFinite);
    EXPECT_EQ(n.mark_text, "NaN 3 in conv2d_4_6");
  }
  EXPECT_TRUE(seen);
}

TEST(OpGraphView, EdgesCarryTheShapeWhereItChanges) {
  const NetBuilder net;
  ViewOptions o;
  o.collapse = Collapse::kNone;
  absl::StatusOr<OpGraphView> v = BuildOpGraphView(net.g, o);
  ASSERT_TRUE(v.ok()) << v.status();
  std::vector<std::string> labels;
  for (const ViewEdge& e : v->edges) {
    if (!e.label.empty()) {
      labels.push_back(v->nodes[e.from].title + "->" + v->nodes[e.to].title + ":" + e.label);
    }
  }
  // From the input (always), out of flatten (1x8x4x4 -> 1x128) and out of fc (-> 1x10).
  EXPECT_THAT(labels,
              ::testing::ElementsAre("x->conv2d_1_1:1x8x4x4", "flatten_1_10->linear_1_11:1x128",
                                     "linear_1_11->output:1x10"));
}

TEST(OpGraphView, ParsesCollapse) {
  EXPECT_EQ(*ParseCollapse("none"), Collapse::kNone);
  EXPECT_EQ(*ParseCollapse("max"), Collapse::kMax);
  EXPECT_EQ(*ParseCollapse("auto"), Collapse::kAuto);
  EXPECT_THAT(std::string(ParseCollapse("all").status().message()), HasSubstr("none, max, auto"));
}

}  // namespace
}  // namespace tracetorch::draw
