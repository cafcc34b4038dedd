// The libtorch door's half of the cross-door test (agent/python/tests/test_cross_door.py): runs a
// TorchScript model through tracetorch::TraceSession as the Python half runs the same model (the
// eager module it was scripted from) through tracetorch.TraceSession, and exports the record.
//
//   door_driver MODEL.pt OUT.json [--daemon ADDR] [--ops on_nan] [--steps N] [--nan-step K]
//                [--model-name NAME]
//
// Each step: x = StepInput(step) (below; the Python half computes the same values), the forward,
// then out.sum().backward(); no optimiser. The graph executor's rewrites are off, so that the
// interpreter runs the model's own ops in order, with eager autograd (the ops the eager model
// runs, and bit-identical values). Exit code 0 with OUT.json written; 2 with one line on stderr.
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/trace_session.h"

namespace {

// ((arange(12) + step) * 0.37).sin() + 1.5, as [3, 4]: finite, in [0.5, 2.5]. At the NaN step the
// first column is -5, so that log(x + 2) inside the block is NaN (its input finite).
at::Tensor StepInput(int64_t step, int64_t nan_step) {
  at::Tensor x =
      ((torch::arange(12, torch::kFloat32) + static_cast<double>(step)) * 0.37).sin() + 1.5;
  x = x.reshape({3, 4});
  if (step == nan_step) x.select(1, 0).fill_(-5.0);
  return x;
}

int Fail(std::string_view message) {
  std::cerr << "door_driver: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Fail("usage: door_driver MODEL.pt OUT.json [options]");
  const std::string model_path = argv[1];
  const std::string out_path = argv[2];
  tracetorch::TraceSessionOptions options;
  int64_t steps = 4;
  int64_t nan_step = -1;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--daemon") {
      options.daemon_address = value;
    } else if (flag == "--ops" && value == "on_nan") {
      options.ops = tracetorch::OpCapture::kOnNan;
    } else if (flag == "--steps") {
      steps = std::atoll(value.c_str());
    } else if (flag == "--nan-step") {
      nan_step = std::atoll(value.c_str());
    } else if (flag == "--model-name") {
      options.model_name = value;
    } else {
      return Fail("unknown option " + std::string(flag));
    }
  }
  torch::jit::setGraphExecutorOptimize(false);
  torch::jit::Module model;
  try {
    model = torch::jit::load(model_path);
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
  auto session = tracetorch::TraceSession::Create(model, options);
  if (!session.ok()) return Fail(session.status().ToString());
  {
    tracetorch::ScopedTrace trace(**session);
    if (!trace.status().ok()) return Fail(trace.status().ToString());
    for (int64_t step = 0; step < steps; ++step) {
      at::Tensor out = model.forward({StepInput(step, nan_step)}).toTensor();
      out.sum().backward();
    }
  }
  if (absl::Status s = (*session)->Export(out_path); !s.ok()) return Fail(s.ToString());
  return 0;
}
