// An outside program on the installed tracetorch package: traces a small C++-frontend model for a
// few training steps with tracetorch::TraceSession, exports the trace as JSON, reads it back with
// tracetorch::ReadTraceFile and checks what it holds.
//
//   tracetorch_consumer OUT.json
//
// Exit 0 only when every check holds; 1 with one line per failed check otherwise.
#include <torch/torch.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trace/anomaly.h"
#include "trace/json.h"
#include "trace/record.h"
#include "tracetorch/trace_session.h"

static_assert(__cplusplus == 201703L, "the consumer must build as C++17, as libtorch programs do");

namespace {

struct NetImpl : torch::nn::Module {
  NetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(8, 16))),
        fc2(register_module("fc2", torch::nn::Linear(16, 4))) {}
  torch::Tensor forward(torch::Tensor x) {
    tracetorch::ModuleScope scope(*this);  // Marks the forward pass.
    return fc2(torch::relu(fc1(x)));
  }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

int failures = 0;

void Check(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "FAILED: " << what << "\n";
    ++failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUT.json\n";
    return 2;
  }
  const std::string out = argv[1];
  constexpr int64_t kSteps = 3;

  torch::manual_seed(0);
  Net net;
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.01));
  tracetorch::TraceSessionOptions options;
  options.model_name = "consumer_net";
  absl::StatusOr<std::unique_ptr<tracetorch::TraceSession>> session =
      tracetorch::TraceSession::Create(*net, options);
  if (!session.ok()) {
    std::cerr << "FAILED: TraceSession::Create: " << session.status() << "\n";
    return 1;
  }
  {
    tracetorch::ScopedTrace trace(**session);
    if (!trace.status().ok()) {
      std::cerr << "FAILED: Start: " << trace.status() << "\n";
      return 1;
    }
    for (int64_t step = 0; step < kSteps; ++step) {
      optimizer.zero_grad();
      torch::Tensor loss =
          torch::mse_loss(net->forward(torch::randn({4, 8})), torch::zeros({4, 4}));
      loss.backward();
      optimizer.step();
    }
  }
  if (absl::Status s = (*session)->Export(out); !s.ok()) {
    std::cerr << "FAILED: Export: " << s << "\n";
    return 1;
  }

  const tracetorch::TraceRecord traced = (*session)->record();
  const absl::StatusOr<tracetorch::TraceRecord> read = tracetorch::ReadTraceFile(out);
  if (!read.ok()) {
    std::cerr << "FAILED: ReadTraceFile: " << read.status() << "\n";
    return 1;
  }
  Check((*session)->steps() == kSteps, "steps() == " + std::to_string(kSteps));
  Check((*session)->hook_errors() == 0, "no hook errors");
  Check(read->metadata.model_name == "consumer_net", "model_name read back");
  Check(read->layers.size() == 2, "2 layers, read " + std::to_string(read->layers.size()));
  const std::vector<std::string> names = {"fc1", "fc2"};
  for (const std::string& name : names) {
    const tracetorch::LayerTrace* layer = read->FindLayer(name);
    Check(layer != nullptr, "layer " + name + " read back");
    if (layer == nullptr) continue;
    Check(layer->type == "Linear", name + " is a Linear");
    Check(layer->forward_count == kSteps, name + " forward_count");
    Check(layer->backward_count == kSteps, name + " backward_count");
    // The record's comparison, compiled here as C++17: what was read is what was traced.
    const tracetorch::LayerTrace* original = traced.FindLayer(name);
    Check(original != nullptr && *original == *layer, name + " reads back equal to the record");
  }
  Check(tracetorch::ParseTraceJson(tracetorch::TraceToJson(*read)).ok(), "TraceToJson re-parses");
  const absl::StatusOr<std::vector<tracetorch::Anomaly>> anomalies =
      tracetorch::DetectAnomalies(*read);
  Check(anomalies.ok(), "DetectAnomalies");

  if (failures > 0) return 1;
  std::cout << "consumer: traced " << kSteps << " steps, " << read->layers.size()
            << " layers read back from " << out << "\n";
  return 0;
}
