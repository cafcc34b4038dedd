#include "trace/op_graph_json.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "trace/json.h"

namespace tracetorch {
namespace {

OpGraph SmallGraph() {
  OpGraph g;
  g.model_name = "Net";
  g.source = "eager";
  g.inputs.push_back({"x", TensorInfo{{2, 3}, "torch.float32", "cpu", std::nullopt}});
  g.params.push_back(
      {"fc.weight", TensorInfo{{4, 3}, "torch.float32", "cpu", std::nullopt}, false});
  ModulePass root;
  root.type = "Net";
  root.inputs.push_back({OpSource::Kind::kInput, 0, 0});
  root.outputs.push_back({OpSource::Kind::kOp, 1, 0});
  root.first_op = 0;
  root.last_op = 1;
  ModulePass fc;
  fc.path = "fc";
  fc.type = "Linear";
  fc.parent = 0;
  fc.params = 12;
  fc.first_op = fc.last_op = 0;
  g.modules = {root, fc};
  OpNode linear;
  linear.label = "linear_1_1";
  linear.func_name = "linear";
  linear.op_name = "aten::linear";
  linear.call_index = linear.index = 1;
  linear.module_pass = 1;
  linear.inputs.push_back({g.inputs[0].tensor, {OpSource::Kind::kInput, 0, 0}, "input"});
  linear.inputs.push_back({g.params[0].tensor, {OpSource::Kind::kParameter, 0, 0}, "weight"});
  TensorStats stats;
  stats.mean = 0.5;
  stats.std = 1.0;
  stats.min = -2.0;
  stats.max = 3.0;
  linear.outputs.push_back(TensorInfo{{2, 4}, "torch.float32", "cpu", stats});
  linear.output_of = {1};
  linear.params = 12;
  linear.time_ms = 0.25;
  linear.saved = true;
  OpNode relu;
  relu.label = "relu_1_2";
  relu.func_name = "relu_";
  relu.op_name = "aten::relu_";
  relu.call_index = 1;
  relu.index = 2;
  relu.module_pass = 0;
  relu.inplace = true;
  relu.inputs.push_back({linear.outputs[0], {OpSource::Kind::kOp, 0, 0}, "self"});
  relu.args.push_back({"dims", "[2, 2]"});
  relu.args.push_back({"mode", "\"reflect\""});
  relu.parents = {0};
  relu.outputs.push_back(TensorInfo{{2, 4}, "torch.float32", "cpu", std::nullopt});
  g.ops = {linear, relu};
  LinkChildren(g);
  g.outputs.push_back({OpSource::Kind::kOp, 1, 0});
  return g;
}

TEST(OpGraphJsonTest, RoundTripIsExact) {
  const OpGraph g = SmallGraph();
  const std::string text = OpGraphToJson(g);
  absl::StatusOr<OpGraph> back = ParseOpGraphJson(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(OpGraphToJson(*back), text);
  ASSERT_EQ(back->ops.size(), 2u);
  EXPECT_EQ(back->ops[1].args[0].value, "[2,2]");  // Minified on reading.
  EXPECT_EQ(back->ops[0].children, (std::vector<int32_t>{1}));
  EXPECT_EQ(back->ops[0].inputs[1].source.kind, OpSource::Kind::kParameter);
  EXPECT_EQ(*back->ops[0].outputs[0].stats->max, 3.0);
  EXPECT_FALSE(back->ops[1].outputs[0].stats.has_value());
  EXPECT_EQ(back->FindModulePass("fc"), 1);
  EXPECT_EQ(OpGraphToJson(*back, 0), OpGraphToJson(g, 0));
}

// A training trace (TraceSession(ops="on_nan")) carries the graph as its "op_graph" member and
// names the op in nan_origin; both read back, and the graph reads as an op graph document too.
TEST(OpGraphJsonTest, TrainingTraceCarriesTheGraphAndTheOriginOp) {
  OpGraph g = SmallGraph();
  g.ops[1].args[0].value = "[2,2]";  // As a reader gives it (minified), so that == holds.
  g.step = 4;
  g.nan_origin = 1;
  TraceRecord r;
  r.metadata.model_name = "Net";
  r.metadata.nan_origin = NanOrigin{"fc", 4, true};
  r.metadata.nan_origin->op = "relu_1_2";
  r.metadata.nan_origin->op_func = "relu_";
  r.metadata.nan_origin->op_module = "<root>";
  r.layers.emplace_back().full_name = "fc";
  r.op_graph = std::make_shared<const OpGraph>(g);
  const std::string line = TraceToJson(r, JsonStyle{.indent = 0});
  EXPECT_NE(line.find(R"("kind":"nan","op":"relu_1_2","op_func":"relu_","op_module":"<root>"})"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(R"(],"op_graph":{"format":"tracetorch.ops",)"), std::string::npos) << line;
  // The member is the document OpGraphToJson writes.
  EXPECT_NE(line.find(absl::StrCat("\"op_graph\":", OpGraphToJson(g, 0), "}")), std::string::npos)
      << line;
  const std::string text = TraceToJson(r, JsonStyle{.indent = 2});
  absl::StatusOr<TraceRecord> back = ParseTraceJson(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  ASSERT_NE(back->op_graph, nullptr);
  EXPECT_EQ(*back->op_graph, g);
  absl::StatusOr<OpGraph> graph = ParseOpGraphJson(text);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(*graph, g);
  EXPECT_EQ(graph->step, 4);

  // Without the member: the reader says what is missing; the record reads as before.
  r.op_graph.reset();
  const std::string plain = TraceToJson(r);
  EXPECT_EQ(plain.find("op_graph"), std::string::npos);
  absl::StatusOr<OpGraph> none = ParseOpGraphJson(plain);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("a training trace without an op graph"),
            std::string::npos);
  // A member that is not an op graph is an error naming it.
  absl::StatusOr<TraceRecord> bad =
      ParseTraceJson(R"({"metadata": {}, "layers": [], "op_graph": {"format": "x"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("op_graph: "), std::string::npos) << bad.status();
}

TEST(OpGraphJsonTest, RejectsWhatIsNotAnOpGraph) {
  EXPECT_EQ(ParseOpGraphJson("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ParseOpGraphJson("{\"layers\": [}").status().message().find("line 1"),
            std::string::npos);
  // A training trace says it has no op graph (see TrainingTraceCarriesTheGraphAndTheOriginOp);
  // another document says what is not an op graph about it.
  absl::StatusOr<OpGraph> g = ParseOpGraphJson("{\"metadata\": {}, \"layers\": []}");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("without an op graph"), std::string::npos);
  g = ParseOpGraphJson("{\"ops\": []}");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("format"), std::string::npos);
  std::string text = OpGraphToJson(SmallGraph());
  std::string newer = text;
  newer.replace(newer.find("\"version\": 1"), 12, "\"version\": 9");
  EXPECT_NE(ParseOpGraphJson(newer).status().message().find("unsupported version 9"),
            std::string::npos);
  std::string bad = text;
  bad.replace(bad.find("\"kind\": \"op\""), 12, "\"kind\": \"xx\"");
  EXPECT_NE(ParseOpGraphJson(bad).status().message().find("kind: expected one of"),
            std::string::npos);
  std::string range = text;
  range.replace(range.find("\"parents\": [\n"), 13, "\"parents\": [\n7,");
  EXPECT_NE(ParseOpGraphJson(range).status().message().find("out of range"), std::string::npos)
      << ParseOpGraphJson(range).status();
}

}  // namespace
}  // namespace tracetorch
