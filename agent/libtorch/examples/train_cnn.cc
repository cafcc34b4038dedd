// Traces a small C++-frontend CNN while it trains, then prints the summary and exports the trace.
//
//   tracetorch_example_train_cnn [OUT.json]      (default: train_cnn_trace.json)
//   tracetorch inspect OUT.json
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "tracetorch/trace_session.h"

namespace {

struct ConvBlockImpl : torch::nn::Module {
  ConvBlockImpl(int64_t in, int64_t out)
      : conv(register_module("conv",
                             torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1)))),
        bn(register_module("bn", torch::nn::BatchNorm2d(out))) {}
  torch::Tensor forward(torch::Tensor x) {
    tracetorch::ModuleScope scope(*this);  // Exact call boundaries (pooling included).
    return torch::max_pool2d(torch::relu(bn(conv(x))), 2);
  }
  torch::nn::Conv2d conv;
  torch::nn::BatchNorm2d bn;
};
TORCH_MODULE(ConvBlock);

struct CnnImpl : torch::nn::Module {
  CnnImpl()
      : features(register_module("features",
                                 torch::nn::Sequential(ConvBlock(1, 16), ConvBlock(16, 32)))),
        fc1(register_module("fc1", torch::nn::Linear(32 * 7 * 7, 64))),
        fc2(register_module("fc2", torch::nn::Linear(64, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    tracetorch::ModuleScope scope(*this);  // Marks the forward pass.
    x = features->forward(x).flatten(1);
    return fc2(torch::relu(fc1(x)));
  }
  torch::nn::Sequential features;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Cnn);

}  // namespace

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "train_cnn_trace.json";
  torch::manual_seed(0);
  Cnn model;
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  tracetorch::TraceSessionOptions options;
  options.model_name = "mnist_cnn";
  auto session = tracetorch::TraceSession::Create(*model, options);
  if (!session.ok()) {
    std::cerr << session.status() << "\n";
    return 1;
  }
  {
    tracetorch::ScopedTrace trace(**session);
    if (!trace.status().ok()) {
      std::cerr << trace.status() << "\n";
      return 1;
    }
    for (int step = 0; step < 20; ++step) {
      const torch::Tensor images = torch::randn({32, 1, 28, 28});
      const torch::Tensor labels = torch::randint(0, 10, {32});
      optimizer.zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(images), labels);
      loss.backward();
      optimizer.step();
    }
  }
  std::cout << (*session)->Summary();
  if (absl::Status s = (*session)->Export(out); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  std::cout << "wrote " << out << "\n";
  return 0;
}
