#include "agent/ops/script_hierarchy.h"

#include <torch/csrc/jit/runtime/interpreter.h>

namespace tracetorch::ops {

std::vector<ScriptFrame> ParseModuleHierarchy(const std::vector<std::string>& hierarchy) {
  std::vector<ScriptFrame> out;
  for (size_t i = 1; i < hierarchy.size(); ++i) {
    const std::string_view e = hierarchy[i];
    if (e.starts_with("::") || e.starts_with("CALL_FUNCTION")) continue;
    const size_t open = e.find('(');
    if (open == std::string_view::npos) continue;
    const std::string_view instance = e.substr(0, open);
    if (instance == "SELF" || instance == "TOP") continue;
    if (instance == "INSTANCE_NAME_UNKNOWN" || instance == "UNKNOWN_INSTANCE") break;
    const size_t close = e.find(')', open);
    const std::string_view type =
        close == std::string_view::npos ? std::string_view() : e.substr(open + 1, close - open - 1);
    out.push_back(ScriptFrame{instance, type});
  }
  return out;
}

std::vector<std::string> CurrentModuleHierarchy() { return torch::jit::currentModuleHierarchy(); }

}  // namespace tracetorch::ops
