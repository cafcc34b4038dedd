// Overhead of the libtorch front door: traced / plain time per iteration for a ResNet-style
// C++-frontend model and its TorchScript twin (testdata/make_script_models.py, BenchNet), forward
// (eval, no grad) and forward+backward (train), statistics on and off. One thread; plain and traced
// blocks are interleaved in one run so that both see the same machine state. Target: <= 1.10 with
// statistics on.
//
//   tracetorch_bench_libtorch [--rounds N] [--iters K] [--batch B]
//   valgrind --tool=callgrind --instr-atstart=no tracetorch_bench_libtorch --count N [--case cpp]
//
// --count N: the instruction-count twin (bench/overhead_table.py). Statistics on, each
// forward+backward case (the README's row; a case takes minutes under callgrind) runs N plain and
// then N traced iterations as two callgrind regions, dumped as "CASE/plain" and "CASE/traced"
// after a warm-up that callgrind does not count; --case cpp or --case torchscript counts one model
// (so that the two can run side by side).
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/trace_session.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define TRACETORCH_HAVE_CALLGRIND 1
#endif

namespace {

namespace nn = torch::nn;

struct BlockImpl : nn::Module {
  explicit BlockImpl(int64_t c)
      : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(c, c, 3).padding(1)))),
        bn1(register_module("bn1", nn::BatchNorm2d(c))),
        conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(c, c, 3).padding(1)))) {}
  torch::Tensor forward(torch::Tensor x) {
    auto y = torch::relu(bn1(conv1(x)));
    return torch::relu(conv2(y) + x);
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
};
TORCH_MODULE(Block);

struct BenchNetImpl : nn::Module {
  explicit BenchNetImpl(int64_t c = 32, int blocks = 4)
      : stem(register_module("stem", nn::Conv2d(nn::Conv2dOptions(3, c, 3).padding(1)))),
        blocks(register_module("blocks", nn::Sequential())),
        fc(register_module("fc", nn::Linear(c, 10))) {
    for (int i = 0; i < blocks; ++i) this->blocks->push_back(Block(c));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(stem(x));
    x = blocks->forward(x);
    return fc(torch::flatten(torch::adaptive_avg_pool2d(x, {1, 1}), 1));
  }
  nn::Conv2d stem;
  nn::Sequential blocks;
  nn::Linear fc;
};
TORCH_MODULE(BenchNet);

using Clock = std::chrono::steady_clock;

double TimeIters(int iters, const std::function<void()>& step) {
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) step();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / iters;
}

struct Result {
  double plain_ms;  // Mean per iteration over all rounds.
  double traced_ms;
  double ratio;  // Median over rounds of traced/plain (robust to a noisy, shared machine).
};

// Interleaves plain and traced blocks, alternating which goes first.
Result Measure(tracetorch::TraceSession& session, int rounds, int iters,
               const std::function<void()>& step) {
  for (int i = 0; i < 3; ++i) step();  // Warm-up (and the profiling executor's first runs).
  if (session.Start().ok()) {
    step();
    (void)session.Stop();
  }
  auto traced_block = [&] {
    if (!session.Start().ok()) std::abort();
    const double ms = TimeIters(iters, step);
    (void)session.Stop();
    return ms;
  };
  double plain = 0, traced = 0;
  std::vector<double> ratios;
  for (int r = 0; r < rounds; ++r) {
    double p, t;
    if (r % 2 == 0) {
      p = TimeIters(iters, step);
      t = traced_block();
    } else {
      t = traced_block();
      p = TimeIters(iters, step);
    }
    plain += p;
    traced += t;
    ratios.push_back(t / p);
  }
  std::sort(ratios.begin(), ratios.end());
  const double median = ratios.size() % 2 == 1
                            ? ratios[ratios.size() / 2]
                            : 0.5 * (ratios[ratios.size() / 2 - 1] + ratios[ratios.size() / 2]);
  return {plain / rounds, traced / rounds, median};
}

// Instructions of `iters` plain and `iters` traced iterations of `step`, as two callgrind
// dumps named after `name`.
void Count(const char* name, tracetorch::TraceSession& session, int iters,
           const std::function<void()>& step) {
#ifdef TRACETORCH_HAVE_CALLGRIND
  step();  // Uninstrumented warm-up: minutes under valgrind each, so one.
  if (!session.Start().ok()) std::abort();
  step();
  (void)session.Stop();
  CALLGRIND_START_INSTRUMENTATION;
  step();  // Translation under instrumentation, outside the regions.
  if (!session.Start().ok()) std::abort();
  step();
  (void)session.Stop();
  const std::string plain = std::string(name) + "/plain";
  const std::string traced = std::string(name) + "/traced";
  CALLGRIND_ZERO_STATS;
  for (int i = 0; i < iters; ++i) step();
  CALLGRIND_DUMP_STATS_AT(plain.c_str());
  if (!session.Start().ok()) std::abort();
  CALLGRIND_ZERO_STATS;
  for (int i = 0; i < iters; ++i) step();
  CALLGRIND_DUMP_STATS_AT(traced.c_str());
  (void)session.Stop();
  CALLGRIND_STOP_INSTRUMENTATION;
#else
  std::fprintf(stderr, "--count: built without valgrind/callgrind.h\n");
  std::exit(2);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15, iters = 3, batch = 16, count = 0;
  std::string_view only_case;  // --case cpp|torchscript: count that model's case alone.
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--count") == 0) count = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--case") == 0) only_case = argv[i + 1];
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--batch") == 0) batch = std::atoi(argv[i + 1]);
  }
  at::set_num_threads(1);
  torch::manual_seed(0);
  BenchNet cpp;
  torch::jit::Module script =
      torch::jit::load(std::string(TRACETORCH_MODELS_DIR) + "/resnet_bench.pt");
  const torch::Tensor x = torch::randn({batch, 3, 32, 32});

  std::printf("%-28s %-6s %12s %12s %8s\n", "model/pass", "stats", "plain ms", "traced ms",
              "ratio*");
  for (const bool stats : {true, false}) {
    tracetorch::TraceSessionOptions options;
    options.capture_stats = stats;
    auto cpp_session = tracetorch::TraceSession::Create(*cpp, options);
    auto script_session = tracetorch::TraceSession::Create(script, options);
    if (!cpp_session.ok() || !script_session.ok()) {
      std::fprintf(stderr, "cannot create sessions\n");
      return 1;
    }
    struct Case {
      const char* name;
      tracetorch::TraceSession* session;
      std::function<void()> step;
    };
    const Case cases[] = {
        {"cpp forward", cpp_session->get(),
         [&] {
           cpp->eval();
           torch::NoGradGuard no_grad;
           cpp->forward(x);
         }},
        {"cpp forward (train, grad)", cpp_session->get(),
         [&] {
           cpp->train();
           cpp->forward(x);
         }},
        {"cpp forward+backward", cpp_session->get(),
         [&] {
           cpp->train();
           cpp->zero_grad();
           cpp->forward(x).sum().backward();
         }},
        {"torchscript forward", script_session->get(),
         [&] {
           script.eval();
           torch::NoGradGuard no_grad;
           script.forward({x});
         }},
        {"torchscript forward+backward", script_session->get(),
         [&] {
           script.train();
           for (const auto& p : script.parameters()) p.mutable_grad() = at::Tensor();
           script.forward({x}).toTensor().sum().backward();
         }},
    };
    if (count > 0) {
      if (!stats) break;
      for (const Case& c : cases) {
        const std::string_view name = c.name;
        if (name.ends_with("forward+backward") &&
            (only_case.empty() || name.substr(0, name.find(' ')) == only_case)) {
          Count(c.name, *c.session, count, c.step);
        }
      }
      continue;
    }
    for (const Case& c : cases) {
      const Result res = Measure(*c.session, rounds, iters, c.step);
      std::printf("%-28s %-6s %12.3f %12.3f %8.3f\n", c.name, stats ? "on" : "off", res.plain_ms,
                  res.traced_ms, res.ratio);
      std::fflush(stdout);
    }
  }
  std::printf("* median over rounds of traced/plain; ms are means per iteration\n");
  return 0;
}
