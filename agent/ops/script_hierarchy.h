// The module path of the running TorchScript instruction, from the interpreter's call stack
// (torch::jit::currentModuleHierarchy(), torch/csrc/jit/runtime/interpreter.h).
//
// The hierarchy's entries look like "TOP(Net)::forward", "blocks(Sequential)::forward",
// "0(Block)::forward", "SELF(Conv2d)::_conv_forward" (a method of the same module), "::relu" (a
// free function), "CALL_FUNCTION::f()::f". The first names the frame's own module (the root, or
// "TOP()" for the graph of a nested interpreter such as a differentiable subgraph) and is
// skipped; SELF/TOP frames, free functions and calls are skipped; an unknown instance name ends
// the path. Checked on torch 1.13.
//
// Thread-safe: no shared state (the hierarchy is the calling thread's).
#ifndef TRACETORCH_AGENT_OPS_SCRIPT_HIERARCHY_H_
#define TRACETORCH_AGENT_OPS_SCRIPT_HIERARCHY_H_

#include <string>
#include <string_view>
#include <vector>

namespace tracetorch::ops {

struct ScriptFrame {
  std::string_view instance;  // The attribute name: "layer1", "0", "conv1".
  std::string_view type;      // The class name: "Sequential", "BasicBlock".
};

// The submodule frames of `hierarchy`, outermost first (views into `hierarchy`).
std::vector<ScriptFrame> ParseModuleHierarchy(const std::vector<std::string>& hierarchy);

// The running instruction's hierarchy (empty outside TorchScript).
std::vector<std::string> CurrentModuleHierarchy();

}  // namespace tracetorch::ops

#endif  // TRACETORCH_AGENT_OPS_SCRIPT_HIERARCHY_H_
