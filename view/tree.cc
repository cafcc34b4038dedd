#include "view/tree.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_split.h"

namespace tracetorch::view {
namespace {

// Deeper paths keep their tail as one component, which bounds recursion on hostile input.
constexpr int kMaxTreeDepth = 64;

// Nodes are built in a flat arena (indices stay valid while it grows), then copied into the nested
// value tree.
struct FlatNode {
  std::string name;
  std::string full_name;
  const LayerTrace* layer = nullptr;
  std::vector<size_t> children;
};

class TreeBuilder {
 public:
  TreeBuilder() { nodes_.push_back(FlatNode{}); }  // Index 0: the invisible root.

  void Add(const LayerTrace& layer) {
    if (layer.full_name.empty()) {
      const size_t node = NewChild(0, layer.name.empty() ? "(model)" : layer.name, "");
      nodes_[node].layer = &layer;
      return;
    }
    size_t parent = 0;
    std::string path;
    const std::vector<absl::string_view> parts =
        absl::StrSplit(layer.full_name, absl::MaxSplits('.', kMaxTreeDepth - 1));
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) path.push_back('.');
      path.append(parts[i].data(), parts[i].size());
      const bool last = i + 1 == parts.size();
      auto it = by_path_.find(path);
      if (it == by_path_.end()) {
        const size_t node = NewChild(parent, parts[i], path);
        by_path_.emplace(path, node);
        parent = node;
      } else if (last && nodes_[it->second].layer != nullptr) {
        // A second layer with the same full_name: keep it, beside the first.
        parent = NewChild(parent, parts[i], path);
      } else {
        parent = it->second;
      }
    }
    nodes_[parent].layer = &layer;
  }

  std::vector<LayerTreeNode> Build() const { return Convert(nodes_[0]).children; }

 private:
  size_t NewChild(size_t parent, absl::string_view name, absl::string_view full_name) {
    const size_t index = nodes_.size();
    nodes_.push_back(FlatNode{std::string(name), std::string(full_name), nullptr, {}});
    nodes_[parent].children.push_back(index);
    return index;
  }

  LayerTreeNode Convert(const FlatNode& flat) const {
    LayerTreeNode node{flat.name, flat.full_name, flat.layer, {}};
    node.children.reserve(flat.children.size());
    for (size_t child : flat.children) node.children.push_back(Convert(nodes_[child]));
    return node;
  }

  std::vector<FlatNode> nodes_;
  absl::flat_hash_map<std::string, size_t> by_path_;
};

}  // namespace

std::vector<LayerTreeNode> BuildLayerTree(const std::vector<LayerTrace>& layers) {
  TreeBuilder builder;
  for (const LayerTrace& layer : layers) builder.Add(layer);
  return builder.Build();
}

}  // namespace tracetorch::view
