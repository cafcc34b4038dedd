#include "tracetorch/trace_ops.h"

#include <torch/script.h>

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/ops/op_recorder.h"

namespace tracetorch {
namespace {

void Flatten(const c10::IValue& v, const std::string& name,
             std::vector<std::pair<std::string, at::Tensor>>* out, int depth = 0) {
  if (v.isTensor()) {
    out->emplace_back(name, v.toTensor());
  } else if (depth < 16 && (v.isList() || v.isTuple())) {
    const std::vector<c10::IValue> items =
        v.isList() ? v.toListRef().vec() : v.toTupleRef().elements().vec();
    for (size_t i = 0; i < items.size(); ++i) {
      Flatten(items[i], absl::StrCat(name, ".", i), out, depth + 1);
    }
  } else if (depth < 16 && v.isGenericDict()) {
    for (const auto& entry : v.toGenericDict()) {
      const c10::IValue& key = entry.key();
      const std::string k = key.isString() ? key.toStringRef()
                            : key.isInt()  ? std::to_string(key.toInt())
                                           : std::string("?");
      Flatten(entry.value(), absl::StrCat(name, ".", k), out, depth + 1);
    }
  }
}

std::vector<at::Tensor> Tensors(const std::vector<std::pair<std::string, at::Tensor>>& named) {
  std::vector<at::Tensor> out;
  for (const auto& [name, t] : named) out.push_back(t);
  return out;
}

}  // namespace

absl::StatusOr<OpTrace> TraceOps(torch::jit::Module& module, std::vector<c10::IValue> inputs,
                                 const TraceOpsOptions& options) {
  try {
    ops::OpRecorderOptions recorder_options;
    recorder_options.save = options.save;
    recorder_options.stats = options.capture_stats;
    recorder_options.script_modules = true;
    ops::OpRecorder recorder(std::move(recorder_options));
    const std::string type = module.type()->name() ? module.type()->name()->name() : "Module";
    recorder.mutable_graph().model_name = options.model_name.empty() ? type : options.model_name;
    recorder.mutable_graph().source = "cpp";

    // Input names from forward's schema (its first argument is self).
    std::vector<std::string> names;
    if (const auto method = module.find_method("forward")) {
      const auto& args = method->function().getSchema().arguments();
      for (size_t i = 1; i < args.size(); ++i) names.push_back(args[i].name());
    }
    std::vector<std::pair<std::string, at::Tensor>> named;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Flatten(inputs[i], i < names.size() ? names[i] : absl::StrCat("input.", i), &named);
    }
    for (const auto& [name, t] : named) recorder.AddInput(name, t);
    for (const auto& p : module.named_parameters(/*recurse=*/true)) {
      recorder.AddParameter(p.name, p.value, /*buffer=*/false);
    }
    for (const auto& b : module.named_buffers(/*recurse=*/true)) {
      recorder.AddParameter(b.name, b.value, /*buffer=*/true);
    }

    if (absl::Status s = recorder.Start(); !s.ok()) return s;
    OpTrace trace;
    try {
      const int32_t root = recorder.PushModule("", type, Tensors(named), 0);
      trace.output = module.forward(std::move(inputs));
      std::vector<std::pair<std::string, at::Tensor>> outputs;
      Flatten(trace.output, "output", &outputs);
      recorder.PopModule(root, Tensors(outputs));
      recorder.SetOutputs(Tensors(outputs));
    } catch (const std::exception& e) {
      recorder.Stop();
      return absl::InvalidArgumentError(absl::StrCat("forward failed: ", e.what()));
    }
    recorder.Stop();
    trace.graph = recorder.graph();
    trace.activations.resize(trace.graph.ops.size());
    for (size_t i = 0; i < trace.graph.ops.size(); ++i) {
      trace.activations[i] = recorder.saved(static_cast<int32_t>(i));
    }
    return trace;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("op capture failed: ", e.what()));
  }
}

}  // namespace tracetorch
