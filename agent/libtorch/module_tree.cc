#include "agent/libtorch/module_tree.h"

#include <torch/csrc/api/include/torch/nn/module.h>
#include <torch/csrc/jit/api/module.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace tracetorch::libtorch_internal {
namespace {

// "torch::nn::Conv2dImpl" -> "Conv2d"; "NetImpl" -> "Net"; "(anonymous namespace)::Foo" -> "Foo".
std::string CppTypeName(const torch::nn::Module& m) {
  std::string name = m.name();
  if (const size_t colon = name.rfind("::"); colon != std::string::npos) name.erase(0, colon + 2);
  if (const size_t lt = name.find('<'); lt != std::string::npos) name.erase(lt);
  constexpr std::string_view kImpl = "Impl";
  if (name.size() > kImpl.size() && std::string_view(name).ends_with(kImpl)) {
    name.resize(name.size() - kImpl.size());
  }
  return name;
}

std::string ScriptTypeName(const torch::jit::Module& m) {
  const c10::ClassTypePtr& type = m.type();
  if (type == nullptr || !type->name().has_value()) return "Module";
  return type->name()->name();
}

int64_t Numel(const at::Tensor& t) { return t.defined() ? t.numel() : 0; }

}  // namespace

int32_t ModuleTree::AddNode(int32_t parent, std::string name, std::string type, int64_t params) {
  ModuleNode n;
  n.name = std::move(name);
  n.type = std::move(type);
  n.parent = parent;
  n.params = params;
  const auto id = static_cast<int32_t>(nodes_.size());
  if (parent >= 0) {
    ModuleNode& p = nodes_[parent];
    n.depth = p.depth + 1;
    n.full_name = p.full_name.empty() ? n.name : absl::StrCat(p.full_name, ".", n.name);
    p.has_children = true;
    p.children.emplace(n.name, id);
  }
  nodes_.push_back(std::move(n));
  return id;
}

ModuleTree ModuleTree::FromCpp(const torch::nn::Module& module) {
  ModuleTree tree;
  // A parameter shared by several modules (tied weights) counts for the first that owns it, in
  // named_modules order, as named_parameters() lists it: the layers add up to the model.
  absl::flat_hash_set<const c10::TensorImpl*> seen;
  auto direct_params = [&seen](const torch::nn::Module& m) {
    int64_t n = 0;
    for (const auto& p : m.named_parameters(/*recurse=*/false)) {
      if (seen.insert(p.value().unsafeGetTensorImpl()).second) n += Numel(p.value());
    }
    return n;
  };
  const std::string root_type = CppTypeName(module);
  tree.AddNode(-1, root_type, root_type, direct_params(module));
  tree.cpp_modules_.push_back(&module);
  tree.by_module_[&module] = 0;
  // Depth-first, in registration order (named_modules order).
  std::vector<std::pair<int32_t, const torch::nn::Module*>> todo = {{0, &module}};
  while (!todo.empty()) {
    auto [parent, m] = todo.back();
    todo.pop_back();
    std::vector<std::pair<int32_t, const torch::nn::Module*>> next;
    for (const auto& child : m->named_children()) {
      const torch::nn::Module* c = child.value().get();
      if (c == nullptr || tree.by_module_.contains(c)) continue;  // Shared submodule: first path.
      const int32_t id = tree.AddNode(parent, child.key(), CppTypeName(*c), direct_params(*c));
      tree.cpp_modules_.push_back(c);
      tree.by_module_[c] = id;
      next.emplace_back(id, c);
    }
    todo.insert(todo.end(), next.rbegin(), next.rend());
  }
  return tree;
}

ModuleTree ModuleTree::FromScript(const torch::jit::Module& module) {
  ModuleTree tree;
  absl::flat_hash_set<const c10::TensorImpl*> seen;  // Tied weights count once (see FromCpp).
  auto direct_params = [&seen](const torch::jit::Module& m) {
    int64_t n = 0;
    for (const auto& p : m.named_parameters(/*recurse=*/false)) {
      if (seen.insert(p.value.unsafeGetTensorImpl()).second) n += Numel(p.value);
    }
    return n;
  };
  const std::string root_type = ScriptTypeName(module);
  tree.AddNode(-1, root_type, root_type, direct_params(module));
  tree.script_modules_.push_back(module._ivalue().get());
  std::vector<std::pair<int32_t, torch::jit::Module>> todo = {{0, module}};
  while (!todo.empty()) {
    auto [parent, m] = todo.back();
    todo.pop_back();
    std::vector<std::pair<int32_t, torch::jit::Module>> next;
    for (const auto& child : m.named_children()) {
      const int32_t id =
          tree.AddNode(parent, child.name, ScriptTypeName(child.value), direct_params(child.value));
      tree.script_modules_.push_back(child.value._ivalue().get());
      next.emplace_back(id, child.value);
    }
    todo.insert(todo.end(), next.rbegin(), next.rend());
  }
  return tree;
}

void ModuleTree::IndexTensors() {
  owners_.clear();
  data_owners_.clear();
  auto add = [this](const at::Tensor& t, int32_t node) {
    if (!t.defined()) return;
    owners_.try_emplace(t.unsafeGetTensorImpl(), node);
    if (t.has_storage() && t.storage().data() != nullptr) {
      data_owners_.try_emplace(t.storage().data(), node);
    }
  };
  for (size_t i = 0; i < cpp_modules_.size(); ++i) {
    const torch::nn::Module* m = cpp_modules_[i];
    for (const auto& p : m->named_parameters(/*recurse=*/false)) add(p.value(), i);
    for (const auto& b : m->named_buffers(/*recurse=*/false)) add(b.value(), i);
  }
  for (size_t i = 0; i < script_modules_.size(); ++i) {
    const torch::jit::Module m(
        c10::intrusive_ptr<c10::ivalue::Object>::unsafe_reclaim_from_nonowning(
            const_cast<c10::ivalue::Object*>(script_modules_[i])));
    for (const auto& p : m.named_parameters(/*recurse=*/false)) add(p.value, i);
    for (const auto& b : m.named_buffers(/*recurse=*/false)) add(b.value, i);
  }
}

void ModuleTree::ForEachTensor(
    absl::FunctionRef<void(std::string name, const at::Tensor& t, bool buffer)> fn) const {
  auto path = [this](size_t node, const std::string& name) {
    const std::string& prefix = nodes_[node].full_name;
    return prefix.empty() ? name : absl::StrCat(prefix, ".", name);
  };
  for (size_t i = 0; i < cpp_modules_.size(); ++i) {
    const torch::nn::Module* m = cpp_modules_[i];
    if (m == nullptr) continue;
    for (const auto& p : m->named_parameters(/*recurse=*/false))
      fn(path(i, p.key()), p.value(), false);
    for (const auto& b : m->named_buffers(/*recurse=*/false)) fn(path(i, b.key()), b.value(), true);
  }
  for (size_t i = 0; i < script_modules_.size(); ++i) {
    if (script_modules_[i] == nullptr) continue;
    const torch::jit::Module m(
        c10::intrusive_ptr<c10::ivalue::Object>::unsafe_reclaim_from_nonowning(
            const_cast<c10::ivalue::Object*>(script_modules_[i])));
    for (const auto& p : m.named_parameters(/*recurse=*/false)) fn(path(i, p.name), p.value, false);
    for (const auto& b : m.named_buffers(/*recurse=*/false)) fn(path(i, b.name), b.value, true);
  }
}

absl::Status ModuleTree::DeclareLayers(agent::Tracer& tracer) {
  auto declare = [&tracer](ModuleNode& n, std::string name, std::string full_name) -> absl::Status {
    absl::StatusOr<agent::Tracer::LayerId> id = tracer.DeclareLayer(
        LayerInfo{std::move(name), n.type, std::move(full_name), n.depth, n.params});
    if (!id.ok()) return id.status();
    n.layer = *id;
    return absl::OkStatus();
  };
  if (nodes_.size() == 1) return declare(nodes_[0], nodes_[0].type, nodes_[0].type);
  for (size_t i = 1; i < nodes_.size(); ++i) {
    ModuleNode& n = nodes_[i];
    if (absl::Status s = declare(n, n.name, n.full_name); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> ModuleTree::BlockNode(int32_t parent, std::string_view name,
                                              agent::Tracer& tracer) {
  if (parent < 0 || parent >= size()) return absl::InvalidArgumentError("unknown module");
  if (name.empty() || name.find('.') != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a block name must be non-empty and hold no '.', got '", std::string(name), "'"));
  }
  auto key = std::make_pair(parent, std::string(name));
  if (auto it = blocks_.find(key); it != blocks_.end()) return it->second;
  if (auto it = nodes_[parent].children.find(key.second); it != nodes_[parent].children.end()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "'", std::string(name), "' is already a submodule of '", nodes_[parent].full_name, "'"));
  }
  const int32_t id = AddNode(parent, key.second, "Block", 0);
  ModuleNode& n = nodes_[id];
  absl::StatusOr<agent::Tracer::LayerId> layer =
      tracer.DeclareLayer(LayerInfo{n.name, n.type, n.full_name, n.depth, 0});
  if (!layer.ok()) return layer.status();
  n.layer = *layer;
  blocks_.emplace(std::move(key), id);
  return id;
}

bool ModuleTree::IsAncestorOrSelf(int32_t a, int32_t b) const {
  if (a < 0 || b < 0) return false;
  while (b >= 0 && nodes_[b].depth > nodes_[a].depth) b = nodes_[b].parent;
  return a == b;
}

int32_t ModuleTree::CommonAncestor(int32_t a, int32_t b) const {
  while (a != b) {
    if (nodes_[a].depth >= nodes_[b].depth) {
      a = nodes_[a].parent;
    } else {
      b = nodes_[b].parent;
    }
    if (a < 0 || b < 0) return 0;
  }
  return a;
}

void ModuleTree::PathBetween(int32_t from, int32_t to, std::vector<int32_t>* out) const {
  out->clear();
  for (int32_t n = to; n >= 0 && n != from; n = nodes_[n].parent) out->push_back(n);
  std::reverse(out->begin(), out->end());
}

int32_t ModuleTree::Resolve(const std::vector<std::string_view>& names) const {
  int32_t node = 0;
  std::string key;
  for (std::string_view name : names) {
    key.assign(name);
    auto it = nodes_[node].children.find(key);
    if (it == nodes_[node].children.end()) break;
    node = it->second;
  }
  return node;
}

}  // namespace tracetorch::libtorch_internal
