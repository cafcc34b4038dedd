#include "view/render.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trace/diff.h"
#include "trace/op_graph.h"
#include "trace/record.h"

namespace tracetorch::view {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TensorInfo Output(std::vector<int64_t> shape, std::optional<double> std_value) {
  TensorInfo info;
  info.shape = std::move(shape);
  info.dtype = "torch.float32";
  info.device = "cpu";
  if (std_value.has_value()) {
    info.stats = TensorStats{};
    info.stats->std = std_value;
  }
  return info;
}

LayerTrace Layer(std::string full_name, std::string type, int64_t params = 0) {
  LayerTrace layer;
  layer.full_name = full_name;
  const size_t dot = full_name.rfind('.');
  layer.name = dot == std::string::npos ? full_name : full_name.substr(dot + 1);
  layer.type = std::move(type);
  layer.params = params;
  layer.latency_ms = 0.0356;
  layer.latency_ms_mean = 0.03361904999792387;
  layer.latency_ms_min = 0.029023000024608336;
  layer.latency_ms_max = 0.047911000024214445;
  layer.forward_count = 20;
  layer.outputs = {Output({16, 64}, 0.3172328472137451)};
  return layer;
}

// TrainNet as the Python library records it: children before parents.
TraceRecord TrainNet() {
  TraceRecord record;
  record.metadata.model_name = "TrainNet";
  record.metadata.pytorch_version = "1.13.0a0";
  record.metadata.total_time_ms = 81.70521500005634;
  record.layers = {Layer("stem", "Linear", 2112),   Layer("blocks.0.fc", "Linear", 4160),
                   Layer("blocks.0", "Block"),      Layer("blocks.1.fc", "Linear", 4160),
                   Layer("blocks.1", "Block"),      Layer("blocks", "Sequential"),
                   Layer("norm", "LayerNorm", 128), Layer("head", "Linear", 650)};
  record.layers[1].grad_norm = 0.2968531847000122;
  record.warnings = {Anomaly{AnomalyType::kExplodingVariance,
                             AnomalySeverity::kWarning,
                             "norm",
                             "Variance spike: std increased from 0.07 to 0.99 (x14.7)",
                             {}}};
  return record;
}

bool IsPlainAscii(const std::string& text) {
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x80 || (u < 0x20 && c != '\n')) return false;
  }
  return true;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(RenderLayerLine, PlainLineHasAllFields) {
  const TraceRecord record = TrainNet();
  EXPECT_EQ(RenderLayerLine(record.layers[1], "fc", {}, Style::Plain()),
            "fc (Linear) | Params: 4.2K | Latency: 0.034ms mean (0.029ms-0.048ms x20) | "
            "grad_norm: 0.2969 | Output: [16, 64] | std: 0.32 [ok]");
}

TEST(RenderLayerLine, SingleForwardShowsOneLatencyAndNoParams) {
  LayerTrace layer = Layer("linear", "Linear");
  layer.forward_count = 1;
  layer.latency_ms = 10.484735999966688;
  layer.outputs = {Output({8, 512, 768}, 1.0014855861663818), Output({8, 10}, std::nullopt)};
  EXPECT_EQ(RenderLayerLine(layer, "linear", {}, Style::Plain()),
            "linear (Linear) | Latency: 10.5ms | Output: [8, 512, 768] | std: 1.00 | "
            "Output: [8, 10] [ok]");
}

TEST(RenderLayerLine, MarksTheWorstAnomalyOfThatLayer) {
  const LayerTrace layer = Layer("head", "Linear");
  std::vector<Anomaly> anomalies = {
      Anomaly{AnomalyType::kHighVariance, AnomalySeverity::kInfo, "head", "m", {}},
      Anomaly{AnomalyType::kNanActivation, AnomalySeverity::kCritical, "other", "m", {}},
  };
  EXPECT_THAT(RenderLayerLine(layer, "head", anomalies, Style::Plain()),
              testing::EndsWith(" [info]"));
  anomalies.push_back(Anomaly{AnomalyType::kDeadLayer, AnomalySeverity::kWarning, "head", "m", {}});
  EXPECT_THAT(RenderLayerLine(layer, "head", anomalies, Style::Plain()),
              testing::EndsWith(" [warning]"));
  anomalies.push_back(
      Anomaly{AnomalyType::kNanActivation, AnomalySeverity::kCritical, "head", "m", {}});
  EXPECT_THAT(RenderLayerLine(layer, "head", anomalies, Style::Plain()),
              testing::EndsWith(" [critical]"));
  EXPECT_THAT(RenderLayerLine(layer, "head", anomalies, Style::Rich()), HasSubstr("✗"));
}

TEST(RenderLayerLine, FlagsNonFiniteValuesAndEmptyOutput) {
  LayerTrace layer = Layer("x", "Linear");
  layer.has_nan = true;
  layer.grad_has_nan = true;
  layer.outputs.clear();
  const std::string line = RenderLayerLine(layer, "x", {}, Style::Plain());
  EXPECT_THAT(line, HasSubstr("| NaN in output |"));
  EXPECT_THAT(line, HasSubstr("| NaN in gradient |"));
  EXPECT_THAT(line, HasSubstr("| Output: none [ok]"));
}

TEST(RenderLayerTree, NestsChildrenFirstRecordPlain) {
  const std::string tree = RenderLayerTree(TrainNet(), Style::Plain());
  const std::vector<std::string> lines = Lines(tree);
  ASSERT_EQ(lines.size(), 9u) << tree;
  EXPECT_EQ(lines[0], "Layers");
  EXPECT_THAT(lines[1], testing::StartsWith("+-- stem (Linear) | Params: 2.1K |"));
  EXPECT_THAT(lines[2], testing::StartsWith("+-- blocks (Sequential) | Latency:"));
  EXPECT_THAT(lines[3], testing::StartsWith("|   +-- 0 (Block) | Latency:"));
  EXPECT_THAT(lines[4], testing::StartsWith("|   |   \\-- fc (Linear) | Params: 4.2K |"));
  EXPECT_THAT(lines[5], testing::StartsWith("|   \\-- 1 (Block) |"));
  EXPECT_THAT(lines[6], testing::StartsWith("|       \\-- fc (Linear) |"));
  EXPECT_THAT(lines[7], testing::StartsWith("+-- norm (LayerNorm) | Params: 128 |"));
  EXPECT_THAT(lines[7], testing::EndsWith(" [warning]"));
  EXPECT_THAT(lines[8], testing::StartsWith("\\-- head (Linear) | Params: 650 |"));
  EXPECT_TRUE(IsPlainAscii(tree));
}

TEST(RenderLayerTree, RichUsesBoxDrawingAndColour) {
  const std::string tree = RenderLayerTree(TrainNet(), Style::Rich());
  EXPECT_THAT(tree, HasSubstr("├── "));
  EXPECT_THAT(tree, HasSubstr("└── "));
  EXPECT_THAT(tree, HasSubstr("│   "));
  EXPECT_THAT(tree, HasSubstr("✓"));
  EXPECT_THAT(tree, HasSubstr("⚠"));
  EXPECT_THAT(tree, HasSubstr("\x1b["));
}

TEST(RenderLayerTree, StructuralAncestorsShowTheirNameOnly) {
  TraceRecord record = TrainNet();
  record.layers = {Layer("encoder.layers.0.attn", "Attention")};
  record.warnings.clear();
  EXPECT_EQ(RenderLayerTree(record, Style::Plain()),
            "Layers\n"
            "\\-- encoder\n"
            "    \\-- layers\n"
            "        \\-- 0\n"
            "            \\-- attn (Attention) | Latency: 0.034ms mean (0.029ms-0.048ms x20) | "
            "Output: [16, 64] | std: 0.32 [ok]\n");
}

TEST(RenderAnomalies, NoneDetected) {
  EXPECT_EQ(RenderAnomalies({}, Style::Plain()), "No anomalies detected\n");
  EXPECT_THAT(RenderAnomalies({}, Style::Rich()), HasSubstr("✓ No anomalies detected"));
}

TEST(RenderAnomalies, PlainTableIsAligned) {
  const std::vector<Anomaly> anomalies = {
      Anomaly{AnomalyType::kExplodingVariance,
              AnomalySeverity::kWarning,
              "norm",
              "Variance spike: std increased from 0.07 to 0.99 (x14.7)",
              {}},
      Anomaly{AnomalyType::kNanActivation, AnomalySeverity::kCritical, "blocks.0.fc", "NaN", {}},
  };
  EXPECT_EQ(
      RenderAnomalies(anomalies, Style::Plain()),
      "Warnings & Anomalies\n"
      "+----------+-------------+---------------------------------------------------------+\n"
      "| Severity | Layer       | Message                                                 |\n"
      "+----------+-------------+---------------------------------------------------------+\n"
      "| warning  | norm        | Variance spike: std increased from 0.07 to 0.99 (x14.7) |\n"
      "| critical | blocks.0.fc | NaN                                                     |\n"
      "+----------+-------------+---------------------------------------------------------+\n");
}

TEST(RenderAnomalies, RichTableRowsHaveEqualDisplayWidth) {
  const std::vector<Anomaly> anomalies = {
      Anomaly{AnomalyType::kExplodingVariance, AnomalySeverity::kWarning, "norm", "spike", {}},
      Anomaly{AnomalyType::kHighVariance, AnomalySeverity::kInfo, "head", "High variance", {}},
  };
  const std::vector<std::string> lines = Lines(RenderAnomalies(anomalies, Style::Rich()));
  ASSERT_EQ(lines.size(), 7u);
  const size_t width = DisplayWidth(lines[1]);
  for (size_t i = 1; i < lines.size(); ++i) EXPECT_EQ(DisplayWidth(lines[i]), width) << lines[i];
  EXPECT_THAT(lines[4], HasSubstr("⚠ warning"));
  EXPECT_THAT(lines[5], HasSubstr("ℹ info"));
}

TEST(RenderAnomalies, ControlCharactersInMessagesAreNeutralised) {
  const std::vector<Anomaly> anomalies = {
      Anomaly{AnomalyType::kDeadLayer, AnomalySeverity::kWarning, "x\x1b[2J", "a\nb", {}}};
  const std::string text = RenderAnomalies(anomalies, Style::Plain());
  EXPECT_THAT(text, Not(HasSubstr("\x1b")));
  EXPECT_THAT(text, HasSubstr("| x?[2J "));
  EXPECT_THAT(text, HasSubstr("| a?b "));
}

TEST(RenderModelPanel, PlainPanel) {
  EXPECT_EQ(RenderModelPanel(TrainNet(), Style::Plain()),
            "+------- Model Summary --------+\n"
            "|  Model             TrainNet  |\n"
            "|  PyTorch           1.13.0a0  |\n"
            "|  Layers            8         |\n"
            "|  Forward passes    20        |\n"
            "|  Parameters        11.2K     |\n"
            "|  Execution Time    81.7ms    |\n"
            "+------------------------------+\n");
}

TEST(RenderModelPanel, ShowsNanOriginAndShownCount) {
  TraceRecord record = TrainNet();
  record.metadata.nan_origin = NanOrigin{"blocks.0.fc", 3, true};
  const std::string panel = RenderModelPanel(record, Style::Plain(), 2);
  EXPECT_THAT(panel, HasSubstr("|  Layers            8 (2 shown)"));
  EXPECT_THAT(panel, HasSubstr("|  NaN origin        blocks.0.fc at step 3 (NaN)"));
}

// A record kept by TraceSession(ops="on_nan"): the panel names the op; inspect lists it with its
// parents (from the op graph document in the record).
TEST(RenderInspect, ShowsTheNanOriginOpAndItsParents) {
  OpGraph g;
  g.model_name = "TrainNet";
  g.source = "eager";
  g.step = 3;
  ModulePass root;
  root.type = "TrainNet";
  ModulePass block;
  block.path = "blocks.0";
  block.type = "Block";
  block.parent = 0;
  g.modules = {root, block};
  OpNode add;
  add.label = "add_1_1";
  add.func_name = "add";
  add.op_name = "aten::add.Tensor";
  add.call_index = add.index = 1;
  add.module_pass = 1;
  add.outputs.push_back(
      TensorInfo{{2, 4}, "torch.float32", "cpu", std::nullopt, NonFiniteCounts{0, 0}});
  OpNode log = add;
  log.label = "log_1_2";
  log.func_name = "log";
  log.op_name = "aten::log";
  log.index = 2;
  log.inputs.push_back({add.outputs[0], {OpSource::Kind::kOp, 0, 0}, "self"});
  log.parents = {0};
  log.outputs[0].nonfinite = NonFiniteCounts{5, 0};
  g.ops = {add, log};
  LinkChildren(g);
  g.nan_origin = 1;
  TraceRecord record = TrainNet();
  record.metadata.nan_origin = NanOrigin{"blocks.0", 3, true};
  record.metadata.nan_origin->op = "log_1_2";
  record.metadata.nan_origin->op_func = "log";
  record.metadata.nan_origin->op_module = "blocks.0";
  record.op_graph = std::make_shared<const OpGraph>(g);
  const std::string text = RenderInspect(record, LayerFilter{}, Style::Plain());
  EXPECT_THAT(text, HasSubstr("|  NaN origin op     log_1_2 (log) in blocks.0"));
  EXPECT_THAT(text, HasSubstr("NaN origin op at step 3: log_1_2 and its parents (2 ops kept)"));
  EXPECT_THAT(text, HasSubstr("| log_1_2 (origin) | log      | blocks.0 | [2, 4]"));
  EXPECT_THAT(text, HasSubstr("nan 5, inf 0"));
  EXPECT_THAT(text, HasSubstr("| add_1_1          | add      | blocks.0 | [2, 4]"));
  // Without a graph: nothing more than before.
  record.op_graph.reset();
  EXPECT_EQ(RenderNanOriginOp(record, Style::Plain()), "");
}

TEST(RenderInspect, FilterLimitsTreeAndAnomalies) {
  const std::string text = RenderInspect(
      TrainNet(), LayerFilter{.name_glob = "blocks.*", .type = "Linear"}, Style::Plain());
  EXPECT_THAT(text, HasSubstr("8 (2 shown)"));
  EXPECT_THAT(text, HasSubstr("\\-- blocks\n"));  // Structural: filtered out, name only.
  EXPECT_THAT(text, HasSubstr("    +-- 0\n"));
  EXPECT_THAT(text, HasSubstr("    |   \\-- fc (Linear) | Params: 4.2K"));
  EXPECT_THAT(text, Not(HasSubstr("LayerNorm")));
  EXPECT_THAT(text, Not(HasSubstr("Variance spike")));
  EXPECT_THAT(text, HasSubstr("No anomalies detected\n"));
}

TEST(RenderInspect, NothingMatches) {
  const std::string text = RenderInspect(TrainNet(), LayerFilter{.type = "Conv2d"}, Style::Plain());
  EXPECT_THAT(text, HasSubstr("Layers\nNo layers matched the filter.\n"));
}

TEST(RenderInspect, WholeRecordPlainHasNoEscapeCodes) {
  const std::string text = RenderInspect(TrainNet(), LayerFilter{}, Style::Plain());
  EXPECT_TRUE(IsPlainAscii(text)) << text;
  EXPECT_THAT(text, HasSubstr("| warning  | norm  | Variance spike"));
}

TEST(RenderSummary, CountsAnomaliesBySeverity) {
  TraceRecord record = TrainNet();
  record.warnings.push_back(
      Anomaly{AnomalyType::kNanActivation, AnomalySeverity::kCritical, "head", "NaN", {}});
  EXPECT_THAT(RenderSummary(record, Style::Plain()),
              testing::EndsWith("+\nAnomalies: 1 critical, 1 warning, 0 info\n"));
}

TEST(RenderDiff, NoChanges) {
  TraceDiff diff{"TrainNet", "TrainNet", {}};
  EXPECT_EQ(RenderDiff(diff, Style::Plain()),
            "+------ Trace Diff ------+\n"
            "|  Baseline    TrainNet  |\n"
            "|  Current     TrainNet  |\n"
            "|  Critical    0         |\n"
            "|  Warnings    0         |\n"
            "+------------------------+\n"
            "\n"
            "No changes detected between traces.\n"
            "\n"
            "OK: no regressions detected.\n");
}

TEST(RenderDiff, EntriesAndVerdict) {
  TraceDiff diff{"TrainNet", "TrainNet", {}};
  diff.entries.push_back(DiffEntry{DiffSeverity::kWarning,
                                   DiffKind::kLatencyRegression,
                                   "stem",
                                   "Latency regression: 0.035ms -> 0.046ms (+34.4%)",
                                   {}});
  diff.entries.push_back(DiffEntry{
      DiffSeverity::kInfo, DiffKind::kLatencyImprovement, "blocks.0.act", "Latency improved", {}});
  const std::string plain = RenderDiff(diff, Style::Plain());
  EXPECT_THAT(plain, HasSubstr("Diff entries\n"));
  EXPECT_THAT(plain, HasSubstr("| Severity | Kind                | Layer        | Message"));
  EXPECT_THAT(plain, HasSubstr("| warning  | latency_regression  | stem         | Latency "
                               "regression: 0.035ms -> 0.046ms (+34.4%) |"));
  EXPECT_THAT(plain, HasSubstr("| info     | latency_improvement | blocks.0.act |"));
  EXPECT_THAT(plain,
              testing::EndsWith("\nFAIL: 0 critical, 1 warning(s) - regressions detected.\n"));
  EXPECT_TRUE(IsPlainAscii(plain));
  EXPECT_THAT(RenderDiff(diff, Style::Rich()),
              HasSubstr("✗ 0 critical, 1 warning(s) — regressions detected."));
}

}  // namespace
}  // namespace tracetorch::view
