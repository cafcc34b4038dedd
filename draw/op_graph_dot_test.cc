#include "draw/op_graph_dot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "draw/testing/net_graph.h"
#include "trace/atomic_file.h"
#include "trace/op_graph_json.h"

namespace tracetorch::draw {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_net::NetBuilder;

int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Node statements of a DOT text agwrite wrote: lines "\t\tname\t[...".
int DotNodes(const std::string& dot) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(dot, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (line.empty() || absl::StrContains(line, "->") || absl::StartsWith(line, "graph") ||
        absl::StartsWith(line, "node") || absl::StartsWith(line, "edge") ||
        absl::StartsWith(line, "subgraph") || absl::StartsWith(line, "digraph")) {
      continue;
    }
    const size_t bracket = line.find('[');
    if (bracket == absl::string_view::npos) continue;
    const absl::string_view name = absl::StripAsciiWhitespace(line.substr(0, bracket));
    if (absl::StartsWith(name, "op") || absl::StartsWith(name, "m") ||
        absl::StartsWith(name, "f") || absl::StartsWith(name, "in") ||
        absl::StartsWith(name, "out")) {
      ++n;
    }
  }
  return n;
}

DrawOptions Options(Collapse collapse, DrawFormat format) {
  DrawOptions o;
  o.view.collapse = collapse;
  o.format = format;
  return o;
}

TEST(DrawOpGraph, DotHasTheViewsNodesClustersAndEdges) {
  const NetBuilder net;
  absl::StatusOr<std::string> dot = DrawOpGraph(net.g, Options(Collapse::kNone, DrawFormat::kDot));
  ASSERT_TRUE(dot.ok()) << dot.status();
  EXPECT_THAT(*dot, StartsWith("digraph G {"));
  EXPECT_EQ(Occurrences(*dot, "subgraph cluster_"), 3);
  EXPECT_EQ(DotNodes(*dot), 13);
  EXPECT_EQ(Occurrences(*dot, " -> "), 14);
  EXPECT_THAT(*dot, HasSubstr("add_1_5"));
  EXPECT_THAT(*dot, HasSubstr("layer1.0: BasicBlock"));
  EXPECT_THAT(*dot, HasSubstr("rankdir=TB"));

  DrawOptions lr = Options(Collapse::kMax, DrawFormat::kDot);
  lr.direction = Direction::kLeftRight;
  dot = DrawOpGraph(net.g, lr);
  ASSERT_TRUE(dot.ok()) << dot.status();
  EXPECT_EQ(Occurrences(*dot, "subgraph cluster_"), 0);
  EXPECT_EQ(DotNodes(*dot), 6);
  EXPECT_THAT(*dot, HasSubstr("rankdir=LR"));
}

TEST(DrawOpGraph, RendersSvgPngAndPdf) {
  const NetBuilder net;
  absl::StatusOr<std::string> svg = DrawOpGraph(net.g, Options(Collapse::kNone, DrawFormat::kSvg));
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_THAT(*svg, HasSubstr("<svg"));
  EXPECT_THAT(*svg, HasSubstr("conv2d_1_1"));
  EXPECT_EQ(Occurrences(*svg, "class=\"cluster\""), 3);
  EXPECT_EQ(Occurrences(*svg, "class=\"node\""), 13);

  absl::StatusOr<std::string> png = DrawOpGraph(net.g, Options(Collapse::kAuto, DrawFormat::kPng));
  ASSERT_TRUE(png.ok()) << png.status();
  ASSERT_GT(png->size(), 8u);
  EXPECT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));

  absl::StatusOr<std::string> pdf = DrawOpGraph(net.g, Options(Collapse::kMax, DrawFormat::kPdf));
  ASSERT_TRUE(pdf.ok()) << pdf.status();
  EXPECT_THAT(*pdf, StartsWith("%PDF"));
}

TEST(DrawOpGraph, WritesTheFile) {
  const NetBuilder net;
  const std::string path = ::testing::TempDir() + "/draw_test.svg";
  ASSERT_TRUE(DrawOpGraphToFile(net.g, Options(Collapse::kAuto, DrawFormat::kSvg), path).ok());
  absl::StatusOr<std::string> text = ReadFileToString(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("<svg"));
  EXPECT_EQ(DrawOpGraphToFile(net.g, Options(Collapse::kAuto, DrawFormat::kSvg),
                              ::testing::TempDir() + "/no/such/dir/x.svg")
                .code(),
            absl::StatusCode::kNotFound);
}

TEST(DrawOpGraph, AnUnknownModuleIsInvalidArgument) {
  const NetBuilder net;
  DrawOptions o = Options(Collapse::kNone, DrawFormat::kSvg);
  o.view.module = "nope";
  EXPECT_EQ(DrawOpGraph(net.g, o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DrawOpGraph, ParsesFormatsAndDirections) {
  EXPECT_EQ(*ParseDrawFormat("png"), DrawFormat::kPng);
  EXPECT_EQ(*ParseDrawFormat("dot"), DrawFormat::kDot);
  EXPECT_FALSE(ParseDrawFormat("jpeg").ok());
  EXPECT_EQ(*ParseDirection("LR"), Direction::kLeftRight);
  EXPECT_FALSE(ParseDirection("BT").ok());
  EXPECT_EQ(*DrawFormatForPath("out/resnet.pdf"), DrawFormat::kPdf);
  EXPECT_EQ(*DrawFormatForPath("g.gv"), DrawFormat::kDot);
  EXPECT_FALSE(DrawFormatForPath("a.dir/resnet").ok());
}

// resnet18 as tl.trace(torchvision resnet18, rand(1, 3, 224, 224)).export(...) wrote it.
class Resnet18 : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<OpGraph> g =
        ReadOpGraphFile(std::string(TRACETORCH_FIXTURES_DIR) + "/ops/resnet18.json");
    ASSERT_TRUE(g.ok()) << g.status();
    graph_ = *std::move(g);
  }
  OpGraphView View(Collapse c) {
    ViewOptions o;
    o.collapse = c;
    absl::StatusOr<OpGraphView> v = BuildOpGraphView(graph_, o);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *std::move(v) : OpGraphView{};
  }
  OpGraph graph_;
};

int AddNodes(const OpGraphView& v) {
  int n = 0;
  for (const ViewNode& node : v.nodes) {
    n += node.kind == ViewNode::Kind::kOp && absl::StartsWith(node.title, "add") ? 1 : 0;
  }
  return n;
}

TEST_F(Resnet18, NoneHasEveryOpAndTheResidualAdds) {
  const OpGraphView v = View(Collapse::kNone);
  int ops = 0;
  for (const ViewNode& n : v.nodes) ops += n.kind == ViewNode::Kind::kOp ? 1 : 0;
  EXPECT_EQ(ops, static_cast<int>(graph_.ops.size()));
  EXPECT_EQ(AddNodes(v), 8);  // One residual add per BasicBlock.
  // layer1..4, their 8 BasicBlocks, the 3 downsample Sequentials.
  EXPECT_EQ(v.clusters.size(), 15u);
}

TEST_F(Resnet18, MaxIsOneBoxPerTopLevelModule) {
  const OpGraphView v = View(Collapse::kMax);
  int boxes = 0;
  for (const ViewNode& n : v.nodes) boxes += n.kind == ViewNode::Kind::kModule ? 1 : 0;
  // conv1, bn1, relu, maxpool, layer1..4, avgpool, fc; the root's flatten stays an op.
  EXPECT_EQ(boxes, 10);
  EXPECT_TRUE(v.clusters.empty());
  EXPECT_EQ(AddNodes(v), 0);
}

TEST_F(Resnet18, AutoKeepsResnet18WholeAndReadable) {
  const OpGraphView v = View(Collapse::kAuto);
  EXPECT_LE(v.nodes.size(), 80u);
  EXPECT_EQ(AddNodes(v), 8);
  absl::StatusOr<std::string> svg = DrawOpGraph(graph_, Options(Collapse::kAuto, DrawFormat::kSvg));
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_EQ(Occurrences(*svg, "class=\"node\""), static_cast<int>(v.nodes.size()));
}

TEST_F(Resnet18, ModuleLayer2IsItsTwoBlocks) {
  ViewOptions o;
  o.collapse = Collapse::kNone;
  o.module = "layer2";
  absl::StatusOr<OpGraphView> v = BuildOpGraphView(graph_, o);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(AddNodes(*v), 2);
  int inputs = 0, outputs = 0;
  for (const ViewNode& n : v->nodes) {
    inputs += n.kind == ViewNode::Kind::kInput ? 1 : 0;
    outputs += n.kind == ViewNode::Kind::kOutput ? 1 : 0;
  }
  EXPECT_EQ(inputs, 1);  // layer1's last add
  EXPECT_EQ(outputs, 1);
  EXPECT_EQ(v->clusters.size(), 3u);  // layer2.0, layer2.0.downsample, layer2.1
}

}  // namespace
}  // namespace tracetorch::draw
