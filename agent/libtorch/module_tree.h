// The module hierarchy of a traced libtorch model, flattened for the operator callbacks.
//
// Node 0 is the root module; every named submodule (torch::jit or torch::nn) is a node whose
// full_name is its dotted path ("blocks.0.conv1"). Parameters and buffers are indexed by TensorImpl
// so that an operator's inputs can be attributed to the module that owns them.
//
// Thread-compatible: built once, then read by the owner thread's callbacks (ModuleScope blocks
// append nodes from that thread only).
#ifndef TRACETORCH_AGENT_LIBTORCH_MODULE_TREE_H_
#define TRACETORCH_AGENT_LIBTORCH_MODULE_TREE_H_

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "agent/tracer.h"

namespace c10::ivalue {
struct Object;
}  // namespace c10::ivalue
namespace torch::jit {
struct Module;
}  // namespace torch::jit
namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace tracetorch::libtorch_internal {

struct ModuleNode {
  std::string name;       // Last path component ("conv1"); the class name for the root.
  std::string type;       // Class name ("Conv2d").
  std::string full_name;  // Dotted path; empty for the root.
  int32_t parent = -1;
  int32_t depth = 0;   // Components in full_name (root: 0).
  int64_t params = 0;  // Direct parameters (elements).
  bool has_children = false;
  agent::Tracer::LayerId layer = agent::Tracer::kNoLayer;
  absl::flat_hash_map<std::string, int32_t> children;  // By name.
};

class ModuleTree {
 public:
  // The hierarchy of `module` (its named_modules), with direct parameter counts.
  static ModuleTree FromScript(const torch::jit::Module& module);
  static ModuleTree FromCpp(const torch::nn::Module& module);

  // Indexes the parameters and buffers of the model (call at each Start(): identities may have
  // changed). Not available for TorchScript trees before this call either.
  void IndexTensors();

  // Calls fn(name, tensor, is_buffer) for every parameter and buffer of the model, named by its
  // dotted path ("blocks.0.conv1.weight"), as named_parameters()/named_buffers() name them.
  void ForEachTensor(
      absl::FunctionRef<void(std::string name, const at::Tensor& t, bool buffer)> fn) const;

  // Declares every layer in `tracer` the way the Python door does: each named submodule, or the
  // root alone when it has none.
  absl::Status DeclareLayers(agent::Tracer& tracer);

  // Returns the child of `parent` called `name` (a ModuleScope block), creating and declaring it.
  absl::StatusOr<int32_t> BlockNode(int32_t parent, std::string_view name, agent::Tracer& tracer);

  const ModuleNode& node(int32_t i) const { return nodes_[i]; }
  int32_t size() const { return static_cast<int32_t>(nodes_.size()); }
  const std::string& root_type() const { return nodes_[0].type; }

  // The node owning parameter/buffer `impl`, or -1.
  int32_t OwnerOf(const c10::TensorImpl* impl) const {
    auto it = owners_.find(impl);
    return it == owners_.end() ? -1 : it->second;
  }
  bool IsParamOrBuffer(const c10::TensorImpl* impl) const { return owners_.contains(impl); }
  // The node owning the parameter/buffer whose storage starts at `data` (a detached alias, as
  // TorchScript's differentiable subgraphs make), or -1.
  int32_t OwnerOfData(const void* data) const {
    auto it = data_owners_.find(data);
    return it == data_owners_.end() ? -1 : it->second;
  }
  // A parameter/buffer or an alias of one's storage.
  bool IsParamOrAlias(const at::Tensor& t) const {
    return owners_.contains(t.unsafeGetTensorImpl()) ||
           (t.has_storage() && data_owners_.contains(t.storage().data()));
  }
  // The node of a C++ module, or -1.
  int32_t NodeOf(const torch::nn::Module* module) const {
    auto it = by_module_.find(module);
    return it == by_module_.end() ? -1 : it->second;
  }
  // True when `a` is `b` or one of its ancestors.
  bool IsAncestorOrSelf(int32_t a, int32_t b) const;
  // Lowest common ancestor.
  int32_t CommonAncestor(int32_t a, int32_t b) const;
  // Nodes from `from` (exclusive) down to `to` (inclusive); REQUIRES IsAncestorOrSelf(from, to).
  // from = -1: from the root (inclusive).
  void PathBetween(int32_t from, int32_t to, std::vector<int32_t>* out) const;
  // Resolves a path of child names below the root; stops at the first unknown name.
  int32_t Resolve(const std::vector<std::string_view>& names) const;

 private:
  int32_t AddNode(int32_t parent, std::string name, std::string type, int64_t params);

  std::vector<ModuleNode> nodes_;
  absl::flat_hash_map<const c10::TensorImpl*, int32_t> owners_;
  absl::flat_hash_map<const void*, int32_t> data_owners_;
  absl::flat_hash_map<const torch::nn::Module*, int32_t> by_module_;
  absl::flat_hash_map<std::pair<int32_t, std::string>, int32_t> blocks_;
  // What IndexTensors() walks: the module behind each node (one of the two is used; not owned,
  // the traced model outlives the session).
  std::vector<const torch::nn::Module*> cpp_modules_;
  std::vector<const c10::ivalue::Object*> script_modules_;
};

}  // namespace tracetorch::libtorch_internal

#endif  // TRACETORCH_AGENT_LIBTORCH_MODULE_TREE_H_
