#include "view/live_view.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trace/record.h"
#include "view/source.h"

namespace tracetorch::view {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TraceRecord Train() {
  absl::StatusOr<TraceRecord> record =
      LoadTraceFile(TRACETORCH_FIXTURES_DIR "/upstream/train_trace.json");
  EXPECT_TRUE(record.ok()) << record.status();
  return record.ok() ? *record : TraceRecord{};
}

LayerTrace Layer(std::string full_name, std::string type, double latency,
                 std::optional<double> grad = std::nullopt, std::optional<double> std_value = 0.5) {
  LayerTrace layer;
  layer.full_name = full_name;
  const size_t dot = full_name.rfind('.');
  layer.name = dot == std::string::npos ? full_name : full_name.substr(dot + 1);
  layer.type = std::move(type);
  layer.latency_ms = latency;
  layer.latency_ms_mean = latency;
  layer.forward_count = 1;
  layer.grad_norm = grad;
  TensorInfo out;
  out.shape = {4, 8};
  if (std_value.has_value()) {
    out.stats = TensorStats{};
    out.stats->std = std_value;
  }
  layer.outputs.push_back(out);
  return layer;
}

Anomaly MakeAnomaly(AnomalyType type, AnomalySeverity severity, std::string layer,
                    std::string message = "") {
  Anomaly anomaly;
  anomaly.type = type;
  anomaly.severity = severity;
  anomaly.layer = std::move(layer);
  anomaly.message = std::move(message);
  return anomaly;
}

LiveViewOptions Opts(Style style, size_t width = 0) {
  LiveViewOptions options;
  options.style = style;
  options.width = width;
  return options;
}

std::vector<std::string> Lines(const std::string& text) { return absl::StrSplit(text, '\n'); }

std::string LineWith(const std::string& text, const std::string& needle) {
  for (const std::string& line : Lines(text)) {
    if (line.find(needle) != std::string::npos) return line;
  }
  return "";
}

TEST(Sparkline, ScalesBetweenMinAndMax) {
  EXPECT_EQ(Sparkline({0, 1, 2, 3, 4, 5, 6, 7}, {}, 16, Style::Plain()), "_.-=+*#@");
  EXPECT_EQ(Sparkline({0, 7}, {}, 16, Style::Rich()), "▁█");
  EXPECT_EQ(Sparkline({10, 20, 15}, {}, 16, Style::Plain()),
            "_@+");  // 15: halfway, 3.5 rounds to level 4.
}

TEST(Sparkline, KeepsTheNewestPoints) {
  EXPECT_EQ(Sparkline({100, 0, 1, 2}, {}, 3, Style::Plain()), "_+@");  // 100 is out of view.
}

TEST(Sparkline, UnknownEqualAndNonFiniteValues) {
  EXPECT_EQ(Sparkline({2, 2, 2}, {}, 16, Style::Plain()), "===");  // All equal: the middle.
  EXPECT_EQ(Sparkline({0, kNaN, 1}, {}, 16, Style::Plain()), "_ @");
  EXPECT_EQ(Sparkline({0, 5, 1}, {false, true, false}, 16, Style::Plain()), "_!@");
  EXPECT_EQ(Sparkline({}, {}, 16, Style::Plain()), "");
  // Colour only paints the flagged point.
  EXPECT_THAT(Sparkline({0, 5}, {false, true}, 16, Style::Rich()), HasSubstr("\x1b[31m!"));
}

TEST(LiveAnomalyOrder, NanOriginFirstThenBySeverity) {
  TraceRecord record;
  record.warnings = {
      MakeAnomaly(AnomalyType::kDeadLayer, AnomalySeverity::kWarning, "a"),
      MakeAnomaly(AnomalyType::kNanActivation, AnomalySeverity::kCritical, "z"),
      MakeAnomaly(AnomalyType::kHighVariance, AnomalySeverity::kInfo, "b"),
      MakeAnomaly(AnomalyType::kNanActivation, AnomalySeverity::kCritical, "origin"),
      MakeAnomaly(AnomalyType::kNanGradient, AnomalySeverity::kCritical, "origin"),
  };
  record.metadata.nan_origin = NanOrigin{.layer = "origin", .step = 3, .is_nan = true};
  const std::vector<Anomaly> ordered = LiveAnomalyOrder(record);
  ASSERT_EQ(ordered.size(), 5u);
  EXPECT_EQ(ordered[0].layer, "origin");
  EXPECT_EQ(ordered[0].type, AnomalyType::kNanActivation);
  EXPECT_EQ(ordered[1].type, AnomalyType::kNanGradient);
  EXPECT_EQ(ordered[2].layer, "z");  // Critical.
  EXPECT_EQ(ordered[3].layer, "a");  // Warning.
  EXPECT_EQ(ordered[4].layer, "b");  // Info.
}

TEST(RenderLiveBody, FileModeShowsTreeValuesAndAnomaliesWithoutSparklines) {
  const TraceRecord record = Train();
  const std::string body = RenderLiveBody(record, nullptr, LiveViewOptions{});
  EXPECT_THAT(body, HasSubstr("Model Summary"));
  EXPECT_THAT(body, HasSubstr("TrainNet"));
  EXPECT_THAT(body, HasSubstr("+-- blocks (Sequential)"));
  EXPECT_THAT(body, HasSubstr("Variance spike: std increased from 0.07 to 0.99"));
  const std::string fc = LineWith(body, "fc (Linear)");
  EXPECT_THAT(fc, HasSubstr("lat "));
  EXPECT_THAT(fc, HasSubstr("std "));
  EXPECT_THAT(fc, HasSubstr("grad "));
  EXPECT_THAT(body, Not(HasSubstr("\x1b")));
  // The values start in one column for every layer.
  std::vector<size_t> columns;
  for (const std::string& line : Lines(body)) {
    const size_t at = line.find("  lat ");
    if (at != std::string::npos) columns.push_back(at);
  }
  ASSERT_GE(columns.size(), 5u);
  for (size_t c : columns) EXPECT_EQ(c, columns.front());
}

TEST(RenderLiveBody, SparklinesFromHistory) {
  TraceRecord record;
  record.metadata.model_name = "Net";
  record.layers = {Layer("enc.fc", "Linear", 0.5, 1.25), Layer("enc", "Sequential", 1.0)};
  LayerHistoryMap history;
  history["enc.fc"] = LayerSeries{.latency_ms = {0.1, 0.2, 0.3},
                                  .output_std = {1, 1, 1},
                                  .grad_norm = {3, 2, 1},
                                  .non_finite = {}};
  const std::string plain = RenderLiveBody(record, &history, LiveViewOptions{});
  const std::string fc = LineWith(plain, "fc (Linear)");
  EXPECT_THAT(fc, HasSubstr("lat   0.500ms _+@"));
  EXPECT_THAT(fc, HasSubstr("std       0.5 ==="));
  EXPECT_THAT(fc, HasSubstr("grad      1.25 @+_"));
  EXPECT_THAT(fc, HasSubstr("[ok]"));
  EXPECT_THAT(plain, HasSubstr("\\-- enc (Sequential)"));
  EXPECT_THAT(plain, HasSubstr("    \\-- fc (Linear)"));

  const std::string rich = RenderLiveBody(record, &history, Opts(Style::Rich()));
  EXPECT_THAT(rich, HasSubstr("▁▅█"));
  EXPECT_THAT(rich, HasSubstr("└── "));
}

TEST(RenderLiveBody, NanOriginLeadsTheAnomalies) {
  TraceRecord record;
  record.layers = {Layer("a", "Linear", 0.1), Layer("b", "Linear", 0.1)};
  record.layers[1].has_nan = true;
  record.warnings = {
      MakeAnomaly(AnomalyType::kDeadLayer, AnomalySeverity::kWarning, "a", "dead"),
      MakeAnomaly(AnomalyType::kNanActivation, AnomalySeverity::kCritical, "b",
                  "NaN detected in output"),
  };
  record.metadata.nan_origin = NanOrigin{.layer = "b", .step = 7, .is_nan = true};
  const std::string body = RenderLiveBody(record, nullptr, LiveViewOptions{});
  const size_t origin = body.find("!! NaN origin: b at step 7 (first NaN)");
  const size_t nan_row = body.find("NaN detected in output");
  const size_t dead_row = body.find("| dead");
  ASSERT_NE(origin, std::string::npos) << body;
  ASSERT_NE(nan_row, std::string::npos);
  ASSERT_NE(dead_row, std::string::npos);
  EXPECT_LT(origin, nan_row);
  EXPECT_LT(nan_row, dead_row);
  EXPECT_THAT(LineWith(body, "b (Linear)"), HasSubstr("NaN out"));
  EXPECT_THAT(LineWith(body, "b (Linear)"), HasSubstr("[critical]"));
  EXPECT_THAT(body, Not(HasSubstr(", op ")));  // No op named yet.

  // TraceSession(ops="on_nan") named the op where it entered: the live view says it too.
  record.metadata.nan_origin->op = "log_1_7";
  record.metadata.nan_origin->op_func = "log";
  record.metadata.nan_origin->op_module = "layer1.0";
  EXPECT_THAT(RenderLiveBody(record, nullptr, LiveViewOptions{}),
              HasSubstr("!! NaN origin: b at step 7 (first NaN), op log_1_7 (log) in layer1.0"));
}

TEST(RenderLiveBody, FiltersApply) {
  const TraceRecord record = Train();
  LiveViewOptions options;
  options.filter.name_glob = "blocks.*";
  options.filter.type = "Linear";
  const std::string body = RenderLiveBody(record, nullptr, options);
  EXPECT_THAT(body, HasSubstr("11 (2 shown)"));
  EXPECT_THAT(body, HasSubstr("fc (Linear)"));
  EXPECT_THAT(body, Not(HasSubstr("GELU")));
  options.filter.type = "Conv2d";
  EXPECT_THAT(RenderLiveBody(record, nullptr, options), HasSubstr("No layers matched the filter."));
}

TEST(RenderLiveFrame, StatusCountersAndWidth) {
  const TraceRecord record = Train();
  LiveFrame frame;
  frame.target = "session s-1";
  frame.address = "unix:/tmp/rpc.sock";
  frame.status = StatusLine{.kind = StatusLine::Kind::kOk, .text = "connected to unix:/tmp/x"};
  frame.session = SessionSummary{.session_id = "s-1",
                                 .state = "live",
                                 .events = 1234,
                                 .dropped_events = 5,
                                 .rejected_events = 0,
                                 .pid = 42,
                                 .host = "box",
                                 .rank = std::nullopt,
                                 .job_id = "",
                                 .position = ""};
  frame.updates = 3;
  frame.record = &record;
  const std::string text = RenderLiveFrame(frame, LiveViewOptions{});
  const std::vector<std::string> lines = Lines(text);
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(lines[0], "tracetorch watch - session s-1 - TrainNet - pid 42 on box - live");
  EXPECT_EQ(lines[1], "connected to unix:/tmp/x");
  EXPECT_THAT(lines[2], StartsWith("events 1234 - dropped 5 - rejected 0 - updates 3"));
  EXPECT_EQ(lines[3], "");
  EXPECT_THAT(text, HasSubstr("+-- blocks (Sequential)"));

  const std::string narrow = RenderLiveFrame(frame, Opts(Style::Plain(), 60));
  for (const std::string& line : Lines(narrow)) EXPECT_LE(DisplayWidth(line), 60u) << line;
  EXPECT_THAT(narrow, HasSubstr(">"));

  const std::string rich = RenderLiveFrame(frame, Opts(Style::Rich(), 80));
  EXPECT_THAT(rich, HasSubstr("● connected to unix:/tmp/x"));
  for (const std::string& line : Lines(rich)) EXPECT_LE(DisplayWidth(line), 80u) << line;
}

TEST(RenderLiveFrame, WaitingAndReconnecting) {
  LiveFrame frame;
  frame.target = "latest";
  frame.status =
      StatusLine{.kind = StatusLine::Kind::kWaiting, .text = "daemon went away - reconnecting..."};
  const std::string text = RenderLiveFrame(frame, LiveViewOptions{});
  EXPECT_THAT(text, HasSubstr("\ndaemon went away - reconnecting...\n"));
  EXPECT_THAT(text, HasSubstr("waiting for the first update..."));
  EXPECT_THAT(text, HasSubstr("updates 0"));
}

RankView Rank(int rank, double fc_latency, double fc_grad) {
  RankView view;
  view.rank = rank;
  view.session.session_id = "s" + std::to_string(rank);
  view.session.state = "live";
  view.session.pid = 100 + rank;
  view.record.layers = {Layer("enc.fc", "Linear", fc_latency, fc_grad),
                        Layer("enc", "Sequential", 2 * fc_latency)};
  return view;
}

TEST(RenderJobFrame, RanksSideBySideWithDivergenceFlagged) {
  LiveJobFrame frame;
  frame.job_id = "job7";
  frame.status = StatusLine{.kind = StatusLine::Kind::kOk, .text = "connected"};
  frame.ranks = {Rank(0, 1.0, 0.5), Rank(1, 1.0, 0.5), Rank(2, 9.0, 0.5)};
  Anomaly d = MakeAnomaly(AnomalyType::kRankDivergence, AnomalySeverity::kWarning, "enc.fc",
                          "rank 2 latency 9ms vs median 1ms");
  d.details = {{"rank", int64_t{2}}, {"metric", std::string("latency_ms")}};
  frame.divergences = {d};
  const std::string text = RenderJobFrame(frame, LiveViewOptions{});
  EXPECT_THAT(text, HasSubstr("tracetorch watch - job job7 - 3 ranks"));
  EXPECT_THAT(text, HasSubstr("rank 2: s2 - pid 102"));
  EXPECT_THAT(text, HasSubstr("Cross-rank divergence"));
  EXPECT_THAT(text, HasSubstr("rank 2 latency 9ms vs median 1ms"));
  const std::string fc = LineWith(text, "fc (Linear)");
  EXPECT_THAT(fc, HasSubstr("fc (Linear) !"));
  EXPECT_THAT(fc, HasSubstr("9.00ms! / 0.5"));
  EXPECT_THAT(fc, HasSubstr("1.00ms / 0.5"));
  EXPECT_EQ(fc.find("1.00ms!"), std::string::npos);  // Only rank 2 is flagged.
  EXPECT_THAT(LineWith(text, "enc (Sequential)"), Not(HasSubstr("!")));
  const std::string header = LineWith(text, "| rank 0");
  EXPECT_THAT(header, HasSubstr("rank 0"));
  EXPECT_THAT(header, HasSubstr("rank 2"));
}

TEST(RenderJobFrame, NoDivergenceAndFilter) {
  LiveJobFrame frame;
  frame.job_id = "j";
  frame.ranks = {Rank(0, 1.0, 0.5), Rank(1, 1.1, 0.5), Rank(2, 1.0, 0.5)};
  LiveViewOptions options;
  options.filter.type = "Sequential";
  const std::string text = RenderJobFrame(frame, options);
  EXPECT_THAT(text, HasSubstr("No cross-rank divergence"));
  EXPECT_THAT(text, HasSubstr("enc (Sequential)"));
  EXPECT_THAT(text, Not(HasSubstr("fc (Linear)")));
}

}  // namespace
}  // namespace tracetorch::view
