// TraceSessionOptions::ops = OpCapture::kOnNan: the op-level NaN origin of the libtorch door, for
// a TorchScript model and a C++-frontend model, with a NaN planted at a chosen step.
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trace/op_graph.h"
#include "trace/op_graph_json.h"
#include "tracetorch/trace_ops.h"
#include "tracetorch/trace_session.h"

namespace tracetorch {
namespace {

namespace nn = torch::nn;

constexpr int64_t kNanStep = 2;

// Inputs in [1, 2) give finite outputs; at kNanStep the first column is -5, so that
// log(x[:, :1] + 2) inside the block is NaN (its input finite).
at::Tensor StepInput(int64_t step) {
  at::Tensor x = torch::rand({3, 4}) + 1.0;
  if (step == kNanStep) x.select(1, 0).fill_(-5.0);
  return x;
}

// The checks both doors share: the origin names the log inside "block" at kNanStep, the graph is
// that step's, and steps after it are not recorded. Returns the graph.
OpGraph ExpectLogOrigin(const TraceSession& session) {
  const TraceRecord r = session.record();
  EXPECT_TRUE(r.metadata.nan_origin.has_value());
  if (!r.metadata.nan_origin) return OpGraph{};
  const NanOrigin& origin = *r.metadata.nan_origin;
  EXPECT_EQ(origin.step, kNanStep);
  EXPECT_EQ(origin.layer, "block");
  EXPECT_EQ(origin.op_func, "log");
  EXPECT_NE(r.op_graph, nullptr);
  if (r.op_graph == nullptr) return OpGraph{};
  // The public accessor gives the same graph as its document.
  EXPECT_EQ(session.op_graph_json(), OpGraphToJson(*r.op_graph, 0));
  absl::StatusOr<OpGraph> g = ParseOpGraphJson(session.op_graph_json());
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return OpGraph{};
  // It reads back to the same document (compared as documents: a NaN statistic is never == itself).
  EXPECT_EQ(OpGraphToJson(*g, 0), OpGraphToJson(*r.op_graph, 0));
  EXPECT_EQ(g->source, "cpp");
  EXPECT_EQ(g->step, kNanStep);
  EXPECT_TRUE(g->nan_origin.has_value());
  if (!g->nan_origin) return *g;
  const OpNode& log = g->ops[*g->nan_origin];
  EXPECT_EQ(log.label, origin.op);
  EXPECT_EQ(log.func_name, "log");
  EXPECT_EQ(g->modules[log.module_pass].path, "block");
  EXPECT_EQ(g->ModuleAddress(log.module_pass), origin.op_module);
  EXPECT_EQ(log.outputs.size(), 1u);
  if (log.outputs.size() == 1) {
    EXPECT_EQ(NanCount(log.outputs[0]), 3);          // The [3, 1] column.
    EXPECT_FALSE(log.outputs[0].stats.has_value());  // Counts only.
  }
  for (int32_t parent : log.parents) {  // Its inputs were finite.
    for (const TensorInfo& t : g->ops[parent].outputs) EXPECT_EQ(NanCount(t), 0);
  }
  EXPECT_EQ(session.ops_stats().recorded_steps, kNanStep + 1);
  EXPECT_EQ(session.ops_stats().skipped_steps, 0);
  EXPECT_EQ(session.hook_errors(), 0);
  return *g;
}

// "label@module(input kinds)" per op, for failure messages.
std::string Ops(const OpGraph& g) {
  std::string out;
  for (const OpNode& op : g.ops) {
    out += op.label + "@" + g.ModuleAddress(op.module_pass) + "(";
    for (const OpInput& in : op.inputs) out += std::to_string(static_cast<int>(in.source.kind));
    out += ") ";
  }
  return out;
}

// The name of the parameter `op` reads as input `i`, or "".
std::string ParamName(const OpGraph& g, const OpNode& op, size_t i) {
  if (i >= op.inputs.size() || op.inputs[i].source.kind != OpSource::Kind::kParameter) return "";
  return g.params[op.inputs[i].source.index].name;
}

TEST(TraceSessionOps, TorchScriptTrainingLoopNamesThePlantedOp) {
  torch::jit::Module model = torch::jit::load(std::string(TRACETORCH_MODELS_DIR) + "/log_block.pt");
  std::vector<at::Tensor> params;
  for (const at::Tensor& p : model.parameters()) params.push_back(p);
  torch::optim::SGD opt(params, torch::optim::SGDOptions(1e-3));
  TraceSessionOptions options;
  options.ops = OpCapture::kOnNan;
  auto session = TraceSession::Create(model, options);
  ASSERT_TRUE(session.ok()) << session.status();
  torch::manual_seed(0);
  {
    ScopedTrace trace(**session);
    ASSERT_TRUE(trace.status().ok()) << trace.status();
    for (int64_t step = 0; step < kNanStep + 2; ++step) {
      opt.zero_grad();
      at::Tensor out = model.forward({StepInput(step)}).toTensor();
      out.sum().backward();
      if (step < kNanStep) opt.step();
      EXPECT_EQ((*session)->op_graph_json().empty(), step < kNanStep) << step;
    }
  }
  const OpGraph g = ExpectLogOrigin(**session);
  // The stem's linear is in "stem", and the graph input is read. (At this step the profiling
  // executor runs an optimised differentiable graph: it detaches the parameters and the input
  // first, so the linears read those detached aliases, and it may reorder ops, so that the
  // block's ops come in two passes, "block:1" and "block:2".)
  ASSERT_EQ(g.inputs.size(), 1u);
  bool stem_linear = false;
  bool input_read = false;
  for (const OpNode& op : g.ops) {
    stem_linear =
        stem_linear || (op.func_name == "linear" && g.ModuleAddress(op.module_pass) == "stem");
    for (const OpInput& in : op.inputs)
      input_read = input_read || in.source.kind == OpSource::Kind::kInput;
  }
  EXPECT_TRUE(input_read) << Ops(g);
  EXPECT_TRUE(stem_linear) << Ops(g);
}

TEST(TraceSessionOps, TraceOpsInsideTheSessionSkipsThatStep) {
  torch::jit::Module model = torch::jit::load(std::string(TRACETORCH_MODELS_DIR) + "/log_block.pt");
  TraceSessionOptions options;
  options.ops = OpCapture::kOnNan;
  auto session = TraceSession::Create(model, options);
  ASSERT_TRUE(session.ok()) << session.status();
  torch::NoGradGuard no_grad;
  {
    ScopedTrace trace(**session);
    absl::StatusOr<OpTrace> ops = TraceOps(model, {StepInput(kNanStep)});
    ASSERT_TRUE(ops.ok()) << ops.status();
    EXPECT_TRUE(ops->graph.nan_origin.has_value());  // TraceOps recorded that forward.
    model.forward({StepInput(0)});
  }
  EXPECT_EQ((*session)->ops_stats().skipped_steps, 1);
  EXPECT_EQ((*session)->ops_stats().recorded_steps, 1);
  EXPECT_TRUE((*session)->op_graph_json().empty());
}

struct LogBlockImpl : nn::Module {
  LogBlockImpl() : fc(register_module("fc", nn::Linear(4, 4))) {}
  at::Tensor forward(const at::Tensor& x) {
    ModuleScope scope(*this);
    const at::Tensor h = fc(x);
    return torch::log(x.slice(1, 0, 1) + 2.0) * h;
  }
  nn::Linear fc;
};
TORCH_MODULE(LogBlock);

struct LogNetImpl : nn::Module {
  LogNetImpl()
      : stem(register_module("stem", nn::Linear(4, 4))),
        block(register_module("block", LogBlock())),
        head(register_module("head", nn::Linear(4, 2))) {}
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor s = stem(x);
    return head(block(x) + s);
  }
  nn::Linear stem;
  LogBlock block;
  nn::Linear head;
};
TORCH_MODULE(LogNet);

TEST(TraceSessionOps, CppTrainingLoopNamesThePlantedOp) {
  torch::manual_seed(3);
  LogNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(1e-3));
  TraceSessionOptions options;
  options.ops = OpCapture::kOnNan;
  auto session = TraceSession::Create(*net, options);
  ASSERT_TRUE(session.ok()) << session.status();
  {
    ScopedTrace trace(**session);
    ASSERT_TRUE(trace.status().ok()) << trace.status();
    for (int64_t step = 0; step < kNanStep + 2; ++step) {
      opt.zero_grad();
      net->forward(StepInput(step)).sum().backward();
      if (step < kNanStep) opt.step();
    }
  }
  const OpGraph g = ExpectLogOrigin(**session);
  EXPECT_EQ(g.ModuleAddress(g.ops[*g.nan_origin].module_pass), "block");  // Exact: a ModuleScope.
  // The forward's first operator, which began the step (nn::Linear's weight.t() in libtorch
  // 1.13), is in the graph: handed over to the watch, it reads stem.weight.
  ASSERT_FALSE(g.ops.empty());
  EXPECT_EQ(g.ModuleAddress(g.ops[0].module_pass), "stem");
  EXPECT_EQ(ParamName(g, g.ops[0], 0), "stem.weight");
  // A new block forgets the kept graph.
  ASSERT_TRUE((*session)->Start().ok());
  net->forward(StepInput(0));
  ASSERT_TRUE((*session)->Stop().ok());
  EXPECT_TRUE((*session)->op_graph_json().empty());
  EXPECT_EQ((*session)->record().op_graph, nullptr);
}

// Attention with an additive causal mask inside the block, then the planted log: the mask's -inf
// at every step must neither stop the recording nor be taken for the origin.
struct MaskedBlockImpl : nn::Module {
  MaskedBlockImpl() : fc(register_module("fc", nn::Linear(4, 4))) {}
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask) {
    ModuleScope scope(*this);
    const at::Tensor h = fc(x);
    const at::Tensor attn = torch::softmax(torch::matmul(h, h.t()) + mask, -1);
    return torch::log(x.slice(1, 0, 1) + 2.0) * torch::matmul(attn, h);
  }
  nn::Linear fc;
};
TORCH_MODULE(MaskedBlock);

struct MaskedNetImpl : nn::Module {
  MaskedNetImpl()
      : block(register_module("block", MaskedBlock())),
        head(register_module("head", nn::Linear(4, 2))) {}
  at::Tensor forward(const at::Tensor& x) {
    ModuleScope scope(*this);
    const int64_t n = x.size(0);
    const at::Tensor mask =
        torch::triu(torch::full({n, n}, -std::numeric_limits<float>::infinity()), 1);
    return head(block(x, mask));
  }
  MaskedBlock block;
  nn::Linear head;
};
TORCH_MODULE(MaskedNet);

TEST(TraceSessionOps, ACausalMaskNeitherStopsTheRecordingNorIsTheOrigin) {
  torch::manual_seed(6);
  MaskedNet net;
  TraceSessionOptions options;
  options.ops = OpCapture::kOnNan;
  auto session = TraceSession::Create(*net, options);
  ASSERT_TRUE(session.ok()) << session.status();
  {
    ScopedTrace trace(**session);
    ASSERT_TRUE(trace.status().ok()) << trace.status();
    for (int64_t step = 0; step < kNanStep + 2; ++step) {
      net->forward(StepInput(step)).sum().backward();
      EXPECT_EQ((*session)->op_graph_json().empty(), step < kNanStep) << step;
    }
  }
  (void)ExpectLogOrigin(**session);
  int activation_findings = 0;
  for (const Anomaly& a : (*session)->anomalies()) {
    if (a.type != AnomalyType::kNanActivation && a.type != AnomalyType::kInfActivation) continue;
    ++activation_findings;
    EXPECT_EQ(a.layer, "block") << a.message;  // One finding, on the origin; none for the mask.
  }
  EXPECT_EQ(activation_findings, 1);
}

TEST(TraceSessionOps, AbsentDaemonKeepsTheGraphInTheRecord) {
  torch::manual_seed(5);
  LogNet net;
  TraceSessionOptions options;
  options.ops = OpCapture::kOnNan;
  options.daemon_address = ::testing::TempDir() + "/ops_no_daemon_here.sock";
  auto session = TraceSession::Create(*net, options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Start().ok());
  for (int64_t step = 0; step <= kNanStep; ++step) net->forward(StepInput(step));
  (void)(*session)->Stop();  // The stream's end times out: no daemon.
  const TraceRecord r = (*session)->record();
  EXPECT_NE(r.op_graph, nullptr);
  ASSERT_TRUE(r.metadata.nan_origin.has_value());
  EXPECT_EQ(r.metadata.nan_origin->op_func, "log");
}

TEST(TraceSessionOps, OffByDefaultAndUnknownModesAreRejected) {
  torch::manual_seed(4);
  LogNet net;
  auto plain = TraceSession::Create(*net);
  ASSERT_TRUE(plain.ok());
  {
    ScopedTrace trace(**plain);
    net->forward(StepInput(kNanStep));
  }
  EXPECT_TRUE((*plain)->op_graph_json().empty());
  ASSERT_TRUE((*plain)->record().metadata.nan_origin.has_value());
  EXPECT_TRUE((*plain)->record().metadata.nan_origin->op.empty());

  TraceSessionOptions bad;
  bad.ops = static_cast<OpCapture>(7);
  EXPECT_EQ(TraceSession::Create(*net, bad).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch
