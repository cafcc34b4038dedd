#include "cli/ops_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cli/test_util.h"
#include "trace/op_graph.h"
#include "trace/op_graph_json.h"

namespace tracetorch::cli {

using ::tracetorch::view::kExitOk;
namespace {

using test_util::ExpectOneLineError;
using test_util::RunCli;
using ::testing::HasSubstr;
using ::testing::Not;

// A model "Net" whose layer2 runs a conv2d and a relu_, then a conv2d at the root.
std::string WriteGraph() {
  OpGraph g;
  g.model_name = "Net";
  g.source = "eager";
  ModulePass root;
  root.type = "Net";
  ModulePass layer2;
  layer2.path = "layer2";
  layer2.type = "Sequential";
  layer2.parent = 0;
  g.modules = {root, layer2};
  const auto op = [&](std::string func, int32_t call, int32_t pass) {
    OpNode n;
    n.func_name = func;
    n.op_name = "aten::" + func;
    n.call_index = call;
    n.index = static_cast<int32_t>(g.ops.size()) + 1;
    n.label = OpLabel(func, call, n.index);
    n.module_pass = pass;
    n.outputs.push_back(TensorInfo{{1, 8, 4, 4}, "torch.float32", "cpu", std::nullopt});
    n.time_ms = 0.5;
    if (!g.ops.empty()) n.parents = {static_cast<int32_t>(g.ops.size()) - 1};
    g.ops.push_back(n);
  };
  op("conv2d", 1, 1);
  op("relu_", 1, 1);
  op("conv2d", 2, 0);
  g.ops[1].output_of = {1};
  LinkChildren(g);
  const std::string path = ::testing::TempDir() + "/ops_command_test.json";
  EXPECT_TRUE(WriteOpGraphFile(path, g).ok());
  return path;
}

TEST(OpsCommand, ListsEveryOpAsATable) {
  const test_util::CliResult r = RunCli({"ops", WriteGraph(), "--color=never"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Net (eager): 3 of 3 ops"));
  EXPECT_THAT(r.out, HasSubstr("conv2d_1_1"));
  EXPECT_THAT(r.out, HasSubstr("relu_1_2"));
  EXPECT_THAT(r.out, HasSubstr("aten::relu_"));
  EXPECT_THAT(r.out, HasSubstr("1x8x4x4"));
}

TEST(OpsCommand, FiltersWithTheSelectorVocabulary) {
  const std::string path = WriteGraph();
  test_util::CliResult r = RunCli({"ops", path, "--func", "conv2d", "--color=never"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 of 3 ops, func('conv2d')"));
  EXPECT_THAT(r.out, Not(HasSubstr("aten::relu_")));  // (relu_1_2 is still a parent.)
  r = RunCli({"ops", path, "--func", "conv2d", "--in-module", "layer2", "--color=never"});
  EXPECT_THAT(r.out, HasSubstr("1 of 3 ops"));
  EXPECT_THAT(r.out, HasSubstr("conv2d_1_1"));
  EXPECT_THAT(r.out, Not(HasSubstr("conv2d_2_3")));
  r = RunCli({"ops", path, "--module", "layer2", "--color=never"});
  EXPECT_THAT(r.out, HasSubstr("relu_1_2"));
  EXPECT_THAT(r.out, HasSubstr("1 of 3 ops"));
  r = RunCli({"ops", path, "--select", "~in_module('layer2')", "--color=never"});
  EXPECT_THAT(r.out, HasSubstr("1 of 3 ops"));
  EXPECT_THAT(r.out, HasSubstr("conv2d_2_3"));
  r = RunCli({"ops", path, "--func", "relu", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"count\": 1"));
  EXPECT_THAT(r.out, HasSubstr("\"label\": \"relu_1_2\""));
}

TEST(OpsCommand, BadInputIsOneLineExit2) {
  const std::string missing = ::testing::TempDir() + "/no_such_ops.json";
  const test_util::CliResult none = RunCli({"ops", missing});
  ExpectOneLineError(none);
  EXPECT_EQ(none.err, "tracetorch: " + missing + ": file not found\n");
  ExpectOneLineError(RunCli({"ops", WriteGraph(), "--select", "func(conv2d"}));
  const test_util::CliResult r =
      RunCli({"ops", std::string(TRACETORCH_FIXTURES_DIR) + "/upstream/train_trace.json"});
  ExpectOneLineError(r);
  // A training trace is read for its op graph (TraceSession(ops="on_nan")); this one has none.
  EXPECT_THAT(r.err, HasSubstr("a training trace without an op graph"));
}

}  // namespace
}  // namespace tracetorch::cli
