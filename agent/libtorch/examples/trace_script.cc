// Traces a TorchScript model file (no Python at run time) and exports the trace.
//
//   tracetorch_example_trace_script [MODEL.pt [OUT.json]]
// The default model is the one the build scripts with /usr/bin/python3
// (agent/libtorch/testdata/make_script_models.py): nested Sequential containers and a residual add.
//   tracetorch inspect OUT.json
#include <torch/script.h>

#include <iostream>
#include <string>

#include "tracetorch/trace_session.h"

int main(int argc, char** argv) {
  const std::string model_path =
      argc > 1 ? argv[1] : std::string(TRACETORCH_MODELS_DIR) + "/resnet_small.pt";
  const std::string out = argc > 2 ? argv[2] : "trace_script_trace.json";
  torch::jit::Module model;
  try {
    model = torch::jit::load(model_path);
  } catch (const std::exception& e) {
    std::cerr << "cannot load " << model_path << ": " << e.what() << "\n";
    return 1;
  }
  model.eval();
  auto session = tracetorch::TraceSession::Create(model);
  if (!session.ok()) {
    std::cerr << session.status() << "\n";
    return 1;
  }
  if (absl::Status s = (*session)->Start(); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  {
    torch::NoGradGuard no_grad;  // An inference server.
    for (int i = 0; i < 10; ++i) model.forward({torch::randn({4, 3, 8, 8})});
  }
  if (absl::Status s = (*session)->Stop(); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  std::cout << (*session)->Summary();
  if (absl::Status s = (*session)->Export(out); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  std::cout << "wrote " << out << "\n";
  return 0;
}
