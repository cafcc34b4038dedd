#include "tracetorch/trace_ops.h"

#include <gtest/gtest.h>
#include <torch/script.h>

#include <string>
#include <vector>

#include "trace/op_graph.h"

namespace tracetorch {
namespace {

std::string ModelPath(const std::string& name) {
  return std::string(TRACETORCH_MODELS_DIR) + "/" + name;
}

std::vector<std::string> FuncNames(const OpGraph& g) {
  std::vector<std::string> out;
  for (const OpNode& op : g.ops) out.push_back(op.func_name);
  return out;
}

TEST(TraceOpsTest, RecordsEveryOpWithItsModulePass) {
  torch::jit::Module model = torch::jit::load(ModelPath("resnet_small.pt"));
  const at::Tensor x = torch::rand({2, 3, 8, 8});
  absl::StatusOr<OpTrace> trace = TraceOps(model, {x});
  ASSERT_TRUE(trace.ok()) << trace.status();
  const OpGraph& g = trace->graph;
  EXPECT_EQ(g.source, "cpp");
  EXPECT_EQ(g.model_name, "SmallNet");
  EXPECT_EQ(FuncNames(g), (std::vector<std::string>{"conv2d", "conv2d", "batch_norm", "relu",
                                                    "conv2d", "add", "relu", "conv2d", "relu",
                                                    "conv2d", "add", "relu", "adaptive_avg_pool2d",
                                                    "flatten", "linear", "relu", "linear"}));
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.inputs[0].name, "x");
  const OpNode& stem = g.ops[0];
  EXPECT_EQ(stem.label, "conv2d_1_1");
  EXPECT_EQ(g.ModuleAddress(stem.module_pass), "stem");
  EXPECT_EQ(stem.inputs[0].source.kind, OpSource::Kind::kInput);
  EXPECT_EQ(stem.inputs[1].source.kind, OpSource::Kind::kParameter);
  EXPECT_EQ(stem.params, 8 * 3 * 3 * 3 + 8);
  // The residual add: in its Block, no module's output.
  const OpNode& add = g.ops[5];
  EXPECT_EQ(add.label, "add_1_6");
  EXPECT_EQ(g.ModuleAddress(add.module_pass), "blocks.0");
  EXPECT_TRUE(add.output_of.empty());
  EXPECT_EQ(add.parents, (std::vector<int32_t>{0, 4}));  // The stem's output and conv2.
  // The relu after it ends blocks.0.
  ASSERT_EQ(g.ops[6].output_of.size(), 1u);
  EXPECT_EQ(g.ModuleAddress(g.ops[6].output_of[0]), "blocks.0");
  EXPECT_EQ(g.ModuleAddress(g.ops[15].module_pass), "head.1");
  EXPECT_EQ(g.ModuleAddress(g.ops[16].output_of.back()), "<root>");
  ASSERT_EQ(trace->activations.size(), g.ops.size());
  ASSERT_TRUE(trace->output.isTensor());
  EXPECT_TRUE(at::equal(trace->activations[16][0], trace->output.toTensor()));
  EXPECT_TRUE(at::allclose(trace->output.toTensor(), model.forward({x}).toTensor()));
}

TEST(TraceOpsTest, SaveSelectorKeepsOnlyWhatItSelects) {
  torch::jit::Module model = torch::jit::load(ModelPath("resnet_small.pt"));
  TraceOpsOptions options;
  options.save = OpSelector::Func("conv2d") & OpSelector::InModule("blocks.1");
  options.capture_stats = false;
  absl::StatusOr<OpTrace> trace = TraceOps(model, {torch::rand({1, 3, 8, 8})}, options);
  ASSERT_TRUE(trace.ok()) << trace.status();
  std::vector<std::string> saved;
  for (size_t i = 0; i < trace->graph.ops.size(); ++i) {
    if (!trace->activations[i].empty()) saved.push_back(trace->graph.ops[i].label);
    EXPECT_FALSE(trace->graph.ops[i].outputs[0].stats.has_value());
  }
  EXPECT_EQ(saved, (std::vector<std::string>{"conv2d_4_8", "conv2d_5_10"}));
}

TEST(TraceOpsTest, AFailingForwardIsAStatus) {
  torch::jit::Module model = torch::jit::load(ModelPath("resnet_small.pt"));
  absl::StatusOr<OpTrace> trace = TraceOps(model, {torch::rand({1, 5, 8, 8})});
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(trace.status().message().find("forward failed"), std::string::npos);
  // Nothing is left installed: the next capture works.
  EXPECT_TRUE(TraceOps(model, {torch::rand({1, 3, 8, 8})}).ok());
}

}  // namespace
}  // namespace tracetorch
