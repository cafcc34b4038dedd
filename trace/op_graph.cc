#include "trace/op_graph.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tracetorch {
namespace {

constexpr std::string_view kRootAddress = "<root>";

}  // namespace

bool operator==(const OpSource&, const OpSource&) = default;
bool operator==(const OpInput&, const OpInput&) = default;
bool operator==(const OpArg&, const OpArg&) = default;
bool operator==(const OpNode&, const OpNode&) = default;
bool operator==(const ModulePass&, const ModulePass&) = default;
bool operator==(const OpGraphInput&, const OpGraphInput&) = default;
bool operator==(const OpGraphParam&, const OpGraphParam&) = default;
bool operator==(const OpGraph&, const OpGraph&) = default;

std::string OpLabel(std::string_view func_name, int32_t call_index, int32_t index) {
  std::string_view base = func_name;
  // The in-place form "relu_" labels as "relu"; dunder names ("__and__") keep their underscores.
  const bool dunder =
      base.size() > 4 && base.substr(0, 2) == "__" && base.substr(base.size() - 2) == "__";
  if (base.size() > 1 && base.back() == '_' && !dunder) base.remove_suffix(1);
  return absl::StrCat(absl::string_view(base.data(), base.size()), "_", call_index, "_", index);
}

void LinkChildren(OpGraph& graph) {
  for (OpNode& op : graph.ops) op.children.clear();
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    for (int32_t parent : graph.ops[i].parents) {
      if (parent < 0 || static_cast<size_t>(parent) >= graph.ops.size()) continue;
      std::vector<int32_t>& children = graph.ops[parent].children;
      if (children.empty() || children.back() != static_cast<int32_t>(i)) {
        children.push_back(static_cast<int32_t>(i));
      }
    }
  }
}

const OpNode* OpGraph::FindOp(std::string_view label) const {
  for (const OpNode& op : ops) {
    if (op.label == label) return &op;
  }
  return nullptr;
}

int32_t OpGraph::PassCount(std::string_view path) const {
  int32_t n = 0;
  for (const ModulePass& m : modules) n += m.path == path ? 1 : 0;
  return n;
}

int32_t OpGraph::FindModulePass(std::string_view address) const {
  if (address == kRootAddress) address = "";
  std::string_view path = address;
  int32_t pass = 1;
  if (const size_t colon = address.rfind(':'); colon != std::string_view::npos) {
    if (!absl::SimpleAtoi(absl::string_view(address.data() + colon + 1, address.size() - colon - 1),
                          &pass) ||
        pass < 1) {
      return -1;
    }
    path = address.substr(0, colon);
  }
  for (size_t i = 0; i < modules.size(); ++i) {
    if (modules[i].path == path && modules[i].pass == pass) return static_cast<int32_t>(i);
  }
  return -1;
}

std::string OpGraph::ModuleAddress(int32_t pass) const {
  if (pass < 0 || static_cast<size_t>(pass) >= modules.size()) return "";
  const ModulePass& m = modules[pass];
  if (m.path.empty()) return std::string(kRootAddress);
  if (PassCount(m.path) <= 1) return m.path;
  return absl::StrCat(m.path, ":", m.pass);
}

bool OpGraph::Within(int32_t pass, int32_t ancestor) const {
  while (pass >= 0 && static_cast<size_t>(pass) < modules.size()) {
    if (pass == ancestor) return true;
    pass = modules[pass].parent;
  }
  return false;
}

}  // namespace tracetorch
