#include "tracetorch/trace_session.h"

#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "trace/forward_passes.h"
#include "trace/json.h"

namespace tracetorch {
namespace {

namespace nn = torch::nn;

std::string ModelPath(const std::string& name) {
  return std::string(TRACETORCH_MODELS_DIR) + "/" + name;
}

const LayerTrace& Layer(const TraceRecord& r, const std::string& name) {
  const LayerTrace* l = r.FindLayer(name);
  if (l == nullptr) {
    static const LayerTrace kMissing;
    ADD_FAILURE() << "no layer " << name;
    return kMissing;
  }
  return *l;
}

std::vector<std::string> LayerNames(const TraceRecord& r) {
  std::vector<std::string> names;
  for (const LayerTrace& l : r.layers) names.push_back(l.full_name);
  std::sort(names.begin(), names.end());
  return names;
}

// Expects `info` to describe `ref` (shape, dtype, statistics computed in double with plain ATen).
void ExpectDescribes(const TensorInfo& info, const at::Tensor& ref, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(info.shape, std::vector<int64_t>(ref.sizes().begin(), ref.sizes().end()));
  EXPECT_EQ(info.dtype, "torch.float32");
  ASSERT_TRUE(info.stats.has_value());
  const at::Tensor d = ref.detach().to(at::kDouble);
  auto near = [](std::optional<double> got, double want) {
    ASSERT_TRUE(got.has_value());
    EXPECT_NEAR(*got, want, 1e-6 * std::max(1.0, std::abs(want)));
  };
  near(info.stats->mean, d.mean().item<double>());
  near(info.stats->std, d.std(/*unbiased=*/false).item<double>());
  near(info.stats->min, d.min().item<double>());
  near(info.stats->max, d.max().item<double>());
  EXPECT_EQ(info.stats->nan_count, 0);
}

torch::jit::Module Child(const torch::jit::Module& m, const std::string& path) {
  torch::jit::Module cur = m;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    cur = cur.attr(part).toModule();
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

at::Tensor Forward(const torch::jit::Module& m, const at::Tensor& x) {
  return const_cast<torch::jit::Module&>(m).forward({x}).toTensor();
}

// ---- TorchScript ----------------------------------------------------------------------------

TEST(TraceSessionScript, NamesCountsShapesAndStatsMatchPlainAten) {
  torch::jit::Module model = torch::jit::load(ModelPath("resnet_small.pt"));
  torch::manual_seed(7);
  const at::Tensor x = torch::randn({2, 3, 8, 8});
  auto session = TraceSession::Create(model);
  ASSERT_TRUE(session.ok()) << session.status();
  constexpr int kForwards = 3;
  ASSERT_TRUE((*session)->Start().ok());
  for (int i = 0; i < kForwards; ++i) model.forward({x});
  ASSERT_TRUE((*session)->Stop().ok());
  const TraceRecord r = (*session)->record();

  // blocks.1.bn1 is an nn.Identity: its forward runs no operator, so it has no call.
  EXPECT_EQ(LayerNames(r), (std::vector<std::string>{"blocks", "blocks.0", "blocks.0.bn1",
                                                     "blocks.0.conv1", "blocks.0.conv2", "blocks.1",
                                                     "blocks.1.conv1", "blocks.1.conv2", "head",
                                                     "head.0", "head.1", "head.2", "stem"}));
  EXPECT_EQ((*session)->steps(), kForwards);
  for (const LayerTrace& l : r.layers) {
    EXPECT_EQ(l.forward_count, kForwards) << l.full_name;
    ASSERT_TRUE(l.latency_ms_min && l.latency_ms_mean && l.latency_ms_max) << l.full_name;
    EXPECT_GT(*l.latency_ms_min, 0.0) << l.full_name;
  }
  EXPECT_EQ(Layer(r, "stem").type, "Conv2d");
  EXPECT_EQ(Layer(r, "stem").params, 8 * 3 * 9 + 8);
  EXPECT_EQ(Layer(r, "blocks").type, "Sequential");
  EXPECT_EQ(Layer(r, "blocks.0").type, "Block");
  EXPECT_EQ(Layer(r, "blocks.0").params, 0);
  EXPECT_EQ(Layer(r, "blocks.0.conv1").depth, 3);
  EXPECT_EQ(Layer(r, "head.1").type, "ReLU");
  EXPECT_EQ(r.metadata.model_name, "SmallNet");

  // The reference: the same submodules run one by one, untraced.
  torch::NoGradGuard no_grad;
  const at::Tensor stem = Forward(Child(model, "stem"), x);
  const at::Tensor c1 = Forward(Child(model, "blocks.0.conv1"), stem);
  const at::Tensor bn = Forward(Child(model, "blocks.0.bn1"), c1);
  const at::Tensor c2 = Forward(Child(model, "blocks.0.conv2"), torch::relu(bn));
  const at::Tensor b0 = Forward(Child(model, "blocks.0"), stem);
  const at::Tensor b1 = Forward(Child(model, "blocks.1"), b0);
  const at::Tensor pooled = torch::flatten(torch::adaptive_avg_pool2d(b1, {1, 1}), 1);
  const at::Tensor h0 = Forward(Child(model, "head.0"), pooled);
  const at::Tensor out = Forward(model, x);

  ExpectDescribes(Layer(r, "stem").inputs.at(0), x, "stem in");
  ExpectDescribes(Layer(r, "stem").outputs.at(0), stem, "stem out");
  ExpectDescribes(Layer(r, "blocks.0.conv1").outputs.at(0), c1, "conv1 out");
  ExpectDescribes(Layer(r, "blocks.0.bn1").outputs.at(0), bn, "bn1 out");
  ExpectDescribes(Layer(r, "blocks.0.conv2").inputs.at(0), torch::relu(bn), "conv2 in");
  ExpectDescribes(Layer(r, "blocks.0.conv2").outputs.at(0), c2, "conv2 out");
  // The residual add and the final relu belong to the block: its output is the block's.
  ExpectDescribes(Layer(r, "blocks.0").inputs.at(0), stem, "block in");
  ExpectDescribes(Layer(r, "blocks.0").outputs.at(0), b0, "block out");
  ExpectDescribes(Layer(r, "blocks").outputs.at(0), b1, "blocks out");
  ExpectDescribes(Layer(r, "head.0").inputs.at(0), pooled, "head.0 in");
  ExpectDescribes(Layer(r, "head.1").outputs.at(0), torch::relu(h0), "head.1 out");
  ExpectDescribes(Layer(r, "head").outputs.at(0), out, "head out");
  EXPECT_EQ(Layer(r, "stem").inputs.size(), 1u);  // Weights and biases are not inputs.
  EXPECT_FALSE(r.metadata.nan_origin.has_value());
}

TEST(TraceSessionScript, NanOriginNamesTheLayer) {
  torch::jit::Module model = torch::jit::load(ModelPath("resnet_small_nan.pt"));
  auto session = TraceSession::Create(model);
  ASSERT_TRUE(session.ok());
  {
    ScopedTrace trace(**session);
    ASSERT_TRUE(trace.status().ok());
    torch::NoGradGuard no_grad;
    model.forward({torch::ones({1, 3, 8, 8})});
  }
  const TraceRecord r = (*session)->record();
  ASSERT_TRUE(r.metadata.nan_origin.has_value());
  EXPECT_EQ(r.metadata.nan_origin->layer, "blocks.1.conv1");
  EXPECT_EQ(r.metadata.nan_origin->step, 0);
  bool found = false;
  for (const Anomaly& a : r.warnings) {
    if (a.type == AnomalyType::kNanActivation && a.layer == "blocks.1.conv1") found = true;
  }
  EXPECT_TRUE(found);
  EXPECT_NE((*session)->Summary().find("NaN origin: blocks.1.conv1 (step 0)"), std::string::npos)
      << (*session)->Summary();
}

TEST(TraceSessionScript, OutputsAndGradientsBitIdentical) {
  torch::jit::Module model = torch::jit::load(ModelPath("resnet_small.pt"));
  torch::manual_seed(3);
  const at::Tensor x = torch::randn({2, 3, 8, 8});
  auto run = [&] {
    for (const auto& p : model.parameters()) p.mutable_grad() = at::Tensor();
    const at::Tensor xin = x.clone().requires_grad_(true);
    const at::Tensor out = model.forward({xin}).toTensor();
    out.square().sum().backward();
    return std::make_pair(out.detach(), xin.grad());
  };
  for (int i = 0; i < 3; ++i) run();  // Let the profiling executor settle.
  const auto plain = run();
  auto session = TraceSession::Create(model);
  ASSERT_TRUE(session.ok());
  std::pair<at::Tensor, at::Tensor> traced;
  {
    ScopedTrace trace(**session);
    traced = run();
  }
  EXPECT_TRUE(at::equal(plain.first, traced.first));
  EXPECT_TRUE(at::equal(plain.second, traced.second));
  const TraceRecord r = (*session)->record();
  EXPECT_EQ(Layer(r, "stem").backward_count, 1);
  EXPECT_TRUE(Layer(r, "head.2").grad_norm.has_value());
}

// ---- C++ frontend ---------------------------------------------------------------------------

struct PlainBlockImpl : nn::Module {
  explicit PlainBlockImpl(int64_t c)
      : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(c, c, 3).padding(1)))),
        conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(c, c, 3).padding(1)))) {}
  torch::Tensor forward(torch::Tensor x) {
    auto y = torch::relu(conv1(x));
    y = conv2(y);
    return torch::relu(y + x);
  }
  nn::Conv2d conv1, conv2;
};
TORCH_MODULE(PlainBlock);

struct ScopedBlockImpl : nn::Module {
  explicit ScopedBlockImpl(int64_t c)
      : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(c, c, 3).padding(1)))),
        conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(c, c, 3).padding(1)))) {}
  torch::Tensor forward(torch::Tensor x) {
    ModuleScope scope(*this);
    auto y = torch::relu(conv1(x));
    y = conv2(y);
    {
      ModuleScope residual(*this, "residual");
      y = y + x;
    }
    return torch::relu(y);
  }
  nn::Conv2d conv1, conv2;
};
TORCH_MODULE(ScopedBlock);

struct NetImpl : nn::Module {
  NetImpl()
      : stem(register_module("stem", nn::Conv2d(nn::Conv2dOptions(3, 8, 3).padding(1)))),
        act(register_module("act", nn::ReLU())),
        plain(register_module("plain", PlainBlock(8))),
        scoped(register_module("scoped", ScopedBlock(8))),
        fc(register_module("fc", nn::Linear(8, 4))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = act(stem(x));
    x = plain(x);
    x = scoped(x);
    x = torch::flatten(torch::adaptive_avg_pool2d(x, {1, 1}), 1);
    return fc(x);
  }
  nn::Conv2d stem;
  nn::ReLU act;
  PlainBlock plain;
  ScopedBlock scoped;
  nn::Linear fc;
};
TORCH_MODULE(Net);

TEST(TraceSessionCpp, AttributesByParameterAndScope) {
  torch::manual_seed(0);
  Net net;
  const at::Tensor x = torch::randn({2, 3, 8, 8});
  auto session = TraceSession::Create(*net);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Start().ok());
  for (int i = 0; i < 2; ++i) net->forward(x);
  ASSERT_TRUE((*session)->Stop().ok());
  const TraceRecord r = (*session)->record();
  // "act" (nn::ReLU, no parameter, no scope) has no call of its own.
  EXPECT_EQ(LayerNames(r),
            (std::vector<std::string>{"fc", "plain", "plain.conv1", "plain.conv2", "scoped",
                                      "scoped.conv1", "scoped.conv2", "scoped.residual", "stem"}));
  for (const LayerTrace& l : r.layers) EXPECT_EQ(l.forward_count, 2) << l.full_name;
  EXPECT_EQ((*session)->steps(), 2);
  EXPECT_EQ(Layer(r, "stem").type, "Conv2d");
  EXPECT_EQ(Layer(r, "plain").type, "PlainBlock");
  EXPECT_EQ(Layer(r, "scoped.residual").type, "Block");
  EXPECT_EQ(r.metadata.model_name, "Net");

  torch::NoGradGuard no_grad;
  const at::Tensor stem = net->stem(x);
  const at::Tensor a = torch::relu(stem);
  const at::Tensor p1 = net->plain->conv1(a);
  const at::Tensor p2 = net->plain->conv2(torch::relu(p1));
  const at::Tensor p = torch::relu(p2 + a);
  const at::Tensor s1 = net->scoped->conv1(p);
  const at::Tensor s2 = net->scoped->conv2(torch::relu(s1));
  const at::Tensor s = torch::relu(s2 + p);
  const at::Tensor out = net->forward(x);
  ExpectDescribes(Layer(r, "stem").inputs.at(0), x, "stem in");
  ExpectDescribes(Layer(r, "stem").outputs.at(0), stem, "stem out");
  // Without a scope a module spans its parameter operators: "plain" ends with conv2.
  ExpectDescribes(Layer(r, "plain").inputs.at(0), a, "plain in");
  ExpectDescribes(Layer(r, "plain").outputs.at(0), p2, "plain out");
  ExpectDescribes(Layer(r, "plain.conv2").inputs.at(0), torch::relu(p1), "plain.conv2 in");
  // With a scope the call is exact, residual add and final relu included.
  ExpectDescribes(Layer(r, "scoped").inputs.at(0), p, "scoped in");
  ExpectDescribes(Layer(r, "scoped").outputs.at(0), s, "scoped out");
  ExpectDescribes(Layer(r, "scoped.residual").outputs.at(0), s2 + p, "residual out");
  ExpectDescribes(Layer(r, "fc").outputs.at(0), out, "fc out");
  EXPECT_EQ(Layer(r, "fc").params, 8 * 4 + 4);
}

TEST(TraceSessionCpp, TrainingLoopCountsForwardAndBackward) {
  torch::manual_seed(1);
  Net net;
  torch::optim::SGD opt(net->parameters(),
                        torch::optim::SGDOptions(0.01).momentum(0.9).weight_decay(1e-4));
  const at::Tensor x = torch::randn({4, 3, 8, 8});
  const at::Tensor y = torch::randn({4, 4});
  TraceSessionOptions options;
  options.model_name = "train";
  auto session = TraceSession::Create(*net, options);
  ASSERT_TRUE(session.ok());
  constexpr int kSteps = 4;
  {
    ScopedTrace trace(**session);
    ASSERT_TRUE(trace.status().ok());
    for (int i = 0; i < kSteps; ++i) {
      opt.zero_grad();
      torch::Tensor loss = torch::mse_loss(net->forward(x), y);
      loss.backward();
      opt.step();  // In-place parameter updates and weight decay are not module calls.
    }
  }
  const TraceRecord r = (*session)->record();
  EXPECT_EQ((*session)->steps(), kSteps);
  EXPECT_EQ((*session)->hook_errors(), 0);
  for (const std::string name : {"stem", "plain.conv1", "plain.conv2", "plain", "scoped",
                                 "scoped.conv1", "scoped.conv2", "fc"}) {
    SCOPED_TRACE(name);
    const LayerTrace& l = Layer(r, name);
    EXPECT_EQ(l.forward_count, kSteps);
    EXPECT_EQ(l.backward_count, kSteps);
    ASSERT_TRUE(l.latency_ms_min && l.latency_ms_mean && l.latency_ms_max);
    EXPECT_LE(*l.latency_ms_min, *l.latency_ms_mean);
    EXPECT_LE(*l.latency_ms_mean, *l.latency_ms_max);
    EXPECT_GT(*l.latency_ms_min, 0.0);
    ASSERT_TRUE(l.bwd_latency_ms_min && l.bwd_latency_ms_max);
    EXPECT_LE(*l.bwd_latency_ms_min, *l.bwd_latency_ms_max);
    ASSERT_TRUE(l.grad_norm.has_value());
    EXPECT_GT(*l.grad_norm, 0.0);
    EXPECT_FALSE(l.grad_has_nan);
  }
  EXPECT_EQ(r.metadata.model_name, "train");
  ASSERT_TRUE(r.metadata.total_time_ms.has_value());
}

TEST(TraceSessionCpp, NanOriginNamesTheLayer) {
  torch::manual_seed(2);
  Net net;
  {
    torch::NoGradGuard no_grad;
    net->plain->conv2->weight[0][0][0][0] = std::nan("");
  }
  auto session = TraceSession::Create(*net);
  ASSERT_TRUE(session.ok());
  {
    ScopedTrace trace(**session);
    net->forward(torch::ones({1, 3, 8, 8}));
    net->forward(torch::ones({1, 3, 8, 8}));
  }
  const TraceRecord r = (*session)->record();
  ASSERT_TRUE(r.metadata.nan_origin.has_value());
  EXPECT_EQ(r.metadata.nan_origin->layer, "plain.conv2");
  EXPECT_EQ(r.metadata.nan_origin->step, 0);
  EXPECT_TRUE(Layer(r, "plain.conv2").has_nan);
  EXPECT_FALSE(Layer(r, "plain.conv1").has_nan);
}

TEST(TraceSessionCpp, OutputsAndGradientsBitIdentical) {
  torch::manual_seed(4);
  Net net;
  const at::Tensor x = torch::randn({2, 3, 8, 8});
  auto run = [&] {
    net->zero_grad();
    const at::Tensor out = net->forward(x);
    out.square().sum().backward();
    std::vector<at::Tensor> grads;
    for (const auto& p : net->parameters()) grads.push_back(p.grad().clone());
    return std::make_pair(out.detach(), grads);
  };
  const auto plain = run();
  auto session = TraceSession::Create(*net);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Start().ok());
  const auto traced = run();
  ASSERT_TRUE((*session)->Stop().ok());
  EXPECT_TRUE(at::equal(plain.first, traced.first));
  ASSERT_EQ(plain.second.size(), traced.second.size());
  for (size_t i = 0; i < plain.second.size(); ++i) {
    EXPECT_TRUE(at::equal(plain.second[i], traced.second[i])) << i;
  }
}

TEST(TraceSessionCpp, StartStopRepeatedly) {
  Net net;
  TraceSessionOptions options;
  options.capture_stats = false;
  auto session = TraceSession::Create(*net, options);
  ASSERT_TRUE(session.ok());
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    ASSERT_TRUE((*session)->Start().ok());
    EXPECT_TRUE(at::hasThreadLocalCallbacks());
    net->forward(torch::randn({1, 3, 8, 8}));
    ASSERT_TRUE((*session)->Stop().ok());
    EXPECT_FALSE(at::hasThreadLocalCallbacks());  // Zero cost when no session runs.
    const TraceRecord r = (*session)->record();
    EXPECT_EQ((*session)->steps(), 1);
    EXPECT_EQ(Layer(r, "fc").forward_count, 1);
    // Stats off: none recorded (the library's stats=None), but the NaN/Inf counts were taken.
    EXPECT_FALSE(Layer(r, "fc").outputs.at(0).stats.has_value());
    EXPECT_EQ(Layer(r, "fc").outputs.at(0).nonfinite, (NonFiniteCounts{}));
  }
  EXPECT_TRUE((*session)->Stop().ok());  // Idempotent.
}

TEST(TraceSessionCpp, OtherThreadIsNotTraced) {
  Net net;
  auto session = TraceSession::Create(*net);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Start().ok());
  absl::Notification done;
  bool other_had_callbacks = true;
  std::thread other([&] {
    other_had_callbacks = at::hasThreadLocalCallbacks();
    torch::NoGradGuard no_grad;
    for (int i = 0; i < 3; ++i) net->forward(torch::randn({1, 3, 8, 8}));
    done.Notify();
  });
  done.WaitForNotification();
  other.join();
  net->forward(torch::randn({1, 3, 8, 8}));
  ASSERT_TRUE((*session)->Stop().ok());
  EXPECT_FALSE(other_had_callbacks);
  const TraceRecord r = (*session)->record();
  EXPECT_EQ((*session)->steps(), 1);
  for (const LayerTrace& l : r.layers) EXPECT_EQ(l.forward_count, 1) << l.full_name;
}

TEST(TraceSessionCpp, ErrorsAreStatuses) {
  Net net;
  TraceSessionOptions bad_thresholds;
  bad_thresholds.thresholds.variance_spike_ratio = 0.5;
  EXPECT_EQ(TraceSession::Create(*net, bad_thresholds).status().code(),
            absl::StatusCode::kInvalidArgument);
  TraceSessionOptions fast_watch;
  fast_watch.watch_path = "/tmp/x.json";
  fast_watch.watch_interval = absl::Milliseconds(10);
  EXPECT_EQ(TraceSession::Create(*net, fast_watch).status().code(),
            absl::StatusCode::kInvalidArgument);
  TraceSessionOptions daemon;
  daemon.daemon_address = "tcp://example.com:1234";
  EXPECT_EQ(TraceSession::Create(*net, daemon).status().code(), absl::StatusCode::kInvalidArgument);

  auto a = TraceSession::Create(*net);
  auto b = TraceSession::Create(*net);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Start().ok());
  EXPECT_EQ((*a)->Start().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*b)->Start().code(), absl::StatusCode::kFailedPrecondition);  // Same thread.
  absl::Status from_other;
  std::thread([&] { from_other = (*a)->Stop(); }).join();
  EXPECT_EQ(from_other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*a)->active());
  ASSERT_TRUE((*a)->Stop().ok());
  EXPECT_TRUE((*b)->Start().ok());
  EXPECT_TRUE((*b)->Stop().ok());
}

TEST(TraceSessionCpp, ExportWritesJsonAndWatchFile) {
  Net net;
  const std::string dir = ::testing::TempDir();
  const std::string watch = dir + "/h7_watch.json";
  const std::string out = dir + "/h7_export.json";
  std::filesystem::remove(watch);
  TraceSessionOptions options;
  options.watch_path = watch;
  auto session = TraceSession::Create(*net, options);
  ASSERT_TRUE(session.ok());
  {
    ScopedTrace trace(**session);
    net->forward(torch::randn({1, 3, 8, 8}));
  }
  ASSERT_TRUE((*session)->Export(out).ok());
  absl::StatusOr<TraceRecord> read = ReadTraceFile(out);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(LayerNames(*read), LayerNames((*session)->record()));
  absl::StatusOr<TraceRecord> watched = ReadTraceFile(watch);  // The final flush at Stop().
  ASSERT_TRUE(watched.ok()) << watched.status();
  EXPECT_EQ(watched->layers.size(), read->layers.size());
}

// The flight recorder (flight/layout.h) reaches the C++ door too: while a session runs, its
// watch file says where the process is.
TEST(TraceSessionCpp, WatchFileSaysWhereTheProcessIs) {
  Net net;
  const std::string watch = ::testing::TempDir() + "/h7_flight_watch.json";
  std::filesystem::remove(watch);
  TraceSessionOptions options;
  options.watch_path = watch;
  options.watch_interval = absl::Milliseconds(100);
  auto session = TraceSession::Create(*net, options);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Start().ok());
  for (int i = 0; i < 3; ++i) net->forward(torch::randn({1, 3, 8, 8}));
  std::string where;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (where.empty() && absl::Now() < deadline) {
    absl::StatusOr<TraceRecord> r = ReadTraceFile(watch);
    if (r.ok()) {
      if (const std::string* p = r->metadata.FindExtra("flight_position"); p != nullptr) where = *p;
    }
    if (where.empty()) absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE((*session)->Stop().ok());
  // In or after the third forward (step 2): the extra is JSON text.
  EXPECT_TRUE(absl::StartsWith(where, "\"step 2, ")) << where;
}

// A block run twice per forward: 6 calls of it in 3 forward passes.
struct TwiceNetImpl : nn::Module {
  TwiceNetImpl()
      : stem(register_module("stem", nn::Conv2d(nn::Conv2dOptions(3, 8, 3).padding(1)))),
        block(register_module("block", ScopedBlock(8))),
        fc(register_module("fc", nn::Linear(8, 4))) {}
  torch::Tensor forward(torch::Tensor x) {
    ModuleScope scope(*this);
    x = block(block(stem(x)));
    return fc(torch::flatten(torch::adaptive_avg_pool2d(x, {1, 1}), 1));
  }
  nn::Conv2d stem;
  ScopedBlock block;
  nn::Linear fc;
};
TORCH_MODULE(TwiceNet);

// Forward passes are the root model's calls, in Summary(), the record and the exported file
// (which `tracetorch summary` reads through the same trace/record.h ForwardPasses).
TEST(TraceSessionCpp, ForwardPassesAreTheRootCallsEverywhere) {
  TwiceNet net;
  auto session = TraceSession::Create(*net);
  ASSERT_TRUE(session.ok()) << session.status();
  {
    ScopedTrace trace(**session);
    for (int i = 0; i < 3; ++i) net->forward(torch::randn({1, 3, 8, 8}));
  }
  const TraceRecord r = (*session)->record();
  EXPECT_EQ(Layer(r, "block").forward_count, 6);
  EXPECT_EQ((*session)->steps(), 3);
  EXPECT_EQ(ForwardPasses(r), 3);
  EXPECT_NE((*session)->Summary().find("\nForward passes: 3\n"), std::string::npos)
      << (*session)->Summary();
  const std::string out = ::testing::TempDir() + "/forward_passes_export.json";
  ASSERT_TRUE((*session)->Export(out).ok());
  absl::StatusOr<TraceRecord> read = ReadTraceFile(out);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(ForwardPasses(*read), 3);
}

TEST(TraceSessionCpp, AbsentDaemonDoesNotDisturbTheRecord) {
  Net net;
  TraceSessionOptions options;
  options.daemon_address = ::testing::TempDir() + "/h7_no_daemon_here.sock";
  auto session = TraceSession::Create(*net, options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Start().ok());
  net->forward(torch::randn({1, 3, 8, 8}));
  EXPECT_TRUE((*session)->Stop().ok());
  const TraceRecord r = (*session)->record();
  EXPECT_EQ(Layer(r, "fc").forward_count, 1);
  // As the Python door's record: the stream's drop count (everything, with no daemon there).
  const std::string* dropped = r.metadata.FindExtra("dropped_events");
  ASSERT_NE(dropped, nullptr);
  EXPECT_NE(*dropped, "0");
}

TEST(TraceSessionScript, InferenceCountsAreExact) {
  torch::jit::Module model = torch::jit::load(ModelPath("resnet_small.pt"));
  auto session = TraceSession::Create(model);
  ASSERT_TRUE(session.ok());
  {
    ScopedTrace trace(**session);
    c10::InferenceMode inference;
    for (int i = 0; i < 4; ++i) model.forward({torch::randn({2, 3, 8, 8})});
  }
  const TraceRecord r = (*session)->record();
  EXPECT_EQ(r.layers.size(), 13u);
  for (const LayerTrace& l : r.layers) EXPECT_EQ(l.forward_count, 4) << l.full_name;
  EXPECT_EQ(Layer(r, "blocks.0.bn1").outputs.size(), 1u);
}

}  // namespace
}  // namespace tracetorch
