#include "view/tree.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trace/record.h"

namespace tracetorch::view {
namespace {

LayerTrace Layer(std::string full_name, std::string type = "Linear") {
  LayerTrace layer;
  layer.full_name = full_name;
  const size_t dot = full_name.rfind('.');
  layer.name = dot == std::string::npos ? full_name : full_name.substr(dot + 1);
  layer.type = std::move(type);
  return layer;
}

// "name[*]" per node, children in braces; '*' marks a node that has a layer.
std::string Shape(const std::vector<LayerTreeNode>& nodes) {
  std::string out;
  for (const LayerTreeNode& node : nodes) {
    if (!out.empty()) out += " ";
    out += node.name;
    if (node.layer != nullptr) out += "*";
    if (!node.children.empty()) out += "{" + Shape(node.children) + "}";
  }
  return out;
}

TEST(BuildLayerTree, NestsChildrenRecordedBeforeParents) {
  // The order the Python library records TrainNet in: children complete first.
  const std::vector<LayerTrace> layers = {
      Layer("stem"),
      Layer("blocks.0.fc"),
      Layer("blocks.0.act", "GELU"),
      Layer("blocks.0", "Block"),
      Layer("blocks.1.fc"),
      Layer("blocks.1.act", "GELU"),
      Layer("blocks.1", "Block"),
      Layer("blocks", "Sequential"),
      Layer("norm", "LayerNorm"),
      Layer("drop", "Dropout"),
      Layer("head"),
  };
  const std::vector<LayerTreeNode> tree = BuildLayerTree(layers);
  EXPECT_EQ(Shape(tree), "stem* blocks*{0*{fc* act*} 1*{fc* act*}} norm* drop* head*");

  ASSERT_EQ(tree.size(), 5u);
  const LayerTreeNode& blocks = tree[1];
  EXPECT_EQ(blocks.full_name, "blocks");
  ASSERT_NE(blocks.layer, nullptr);
  EXPECT_EQ(blocks.layer->type, "Sequential");
  ASSERT_EQ(blocks.children.size(), 2u);
  EXPECT_EQ(blocks.children[0].full_name, "blocks.0");
  EXPECT_EQ(blocks.children[0].layer, &layers[3]);
  EXPECT_EQ(blocks.children[0].children[0].full_name, "blocks.0.fc");
  EXPECT_EQ(blocks.children[0].children[0].layer, &layers[1]);
}

TEST(BuildLayerTree, ParentsFirstGivesTheSameTree) {
  const std::vector<LayerTrace> layers = {Layer("blocks"), Layer("blocks.0"), Layer("blocks.0.fc"),
                                          Layer("head")};
  EXPECT_EQ(Shape(BuildLayerTree(layers)), "blocks*{0*{fc*}} head*");
}

TEST(BuildLayerTree, MissingAncestorsBecomeStructuralNodes) {
  const std::vector<LayerTrace> layers = {Layer("encoder.layers.0.attn"),
                                          Layer("encoder.layers.1.attn"), Layer("head")};
  const std::vector<LayerTreeNode> tree = BuildLayerTree(layers);
  EXPECT_EQ(Shape(tree), "encoder{layers{0{attn*} 1{attn*}}} head*");
  EXPECT_EQ(tree[0].layer, nullptr);
  EXPECT_EQ(tree[0].children[0].full_name, "encoder.layers");
  EXPECT_EQ(tree[0].children[0].children[1].full_name, "encoder.layers.1");
}

TEST(BuildLayerTree, SiblingsKeepFirstAppearanceOrder) {
  // "b" first appears through its child, before "a"; "c" last.
  const std::vector<LayerTrace> layers = {Layer("b.x"), Layer("a"), Layer("b"), Layer("c"),
                                          Layer("b.y")};
  EXPECT_EQ(Shape(BuildLayerTree(layers)), "b*{x* y*} a* c*");
}

TEST(BuildLayerTree, PrefixThatIsNotAPathComponentIsNotAParent) {
  // "block" is not the parent of "blocks.0" even though it is a string prefix.
  const std::vector<LayerTrace> layers = {Layer("blocks.0"), Layer("block"), Layer("blocks")};
  EXPECT_EQ(Shape(BuildLayerTree(layers)), "blocks*{0*} block*");
}

TEST(BuildLayerTree, EmptyFullNameIsATopLevelNode) {
  LayerTrace root = Layer("");
  root.name = "TrainNet";
  const std::vector<LayerTrace> layers = {Layer("fc"), root};
  const std::vector<LayerTreeNode> tree = BuildLayerTree(layers);
  EXPECT_EQ(Shape(tree), "fc* TrainNet*");
}

TEST(BuildLayerTree, DuplicateFullNamesAreBothKept) {
  const std::vector<LayerTrace> layers = {Layer("a.b"), Layer("a.b", "Conv2d"), Layer("a")};
  const std::vector<LayerTreeNode> tree = BuildLayerTree(layers);
  EXPECT_EQ(Shape(tree), "a*{b* b*}");
  EXPECT_EQ(tree[0].children[1].layer, &layers[1]);
}

TEST(BuildLayerTree, EmptyList) { EXPECT_TRUE(BuildLayerTree({}).empty()); }

TEST(BuildLayerTree, VeryDeepPathsAreBounded) {
  std::string path = "m";
  for (int i = 0; i < 5000; ++i) path += ".m";
  const std::vector<LayerTrace> layers = {Layer(path)};
  const std::vector<LayerTreeNode> tree = BuildLayerTree(layers);
  int depth = 0;
  const LayerTreeNode* node = &tree[0];
  while (!node->children.empty()) {
    node = &node->children[0];
    ++depth;
  }
  EXPECT_EQ(depth, 63);
  EXPECT_EQ(node->layer, &layers[0]);
}

}  // namespace
}  // namespace tracetorch::view
