// Nesting of a trace's layers by module path, for the layer trees of `tracetorch inspect`
// (render.h) and of the live views (live_view.h).
//
// A layer is placed under its parent by full_name ("blocks.0.fc" under "blocks.0" under "blocks"),
// whatever order the layers were recorded in: the Python library records children before their
// parents (a module finishes its forward after its submodules do). An ancestor that is not in the
// list (filtered out, or never called) still appears, as a structural node without a layer, so the
// shape of the model is kept.
//
// Siblings are ordered by the first appearance, in the layer list, of themselves or any descendant:
// for a recorded trace that is execution order.
//
// Thread-compatible; no shared state.
#ifndef TRACETORCH_VIEW_TREE_H_
#define TRACETORCH_VIEW_TREE_H_

#include <string>
#include <vector>

#include "trace/record.h"

namespace tracetorch::view {

struct LayerTreeNode {
  std::string name;       // Last path component ("fc"); the display name.
  std::string full_name;  // Dotted path ("blocks.0.fc").
  // The layer at this path, or nullptr for a structural ancestor that is not in the list.
  // Points into the vector passed to BuildLayerTree.
  const LayerTrace* layer = nullptr;
  std::vector<LayerTreeNode> children;
};

// Returns the top-level nodes. `layers` must outlive the result (nodes point into it).
// Paths are split on '.', into at most 64 levels (the rest of a deeper path stays one component). A
// layer with an empty full_name is a top-level node named after LayerTrace::name (or "(model)" when
// that is empty too). If two layers share a full_name, both are kept, the second as a sibling of
// the first.
std::vector<LayerTreeNode> BuildLayerTree(const std::vector<LayerTrace>& layers);

}  // namespace tracetorch::view

#endif  // TRACETORCH_VIEW_TREE_H_
