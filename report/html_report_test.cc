#include "report/html_report.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simdjson.h"
#include "trace/atomic_file.h"
#include "trace/diff.h"
#include "trace/op_graph.h"
#include "trace/op_graph_json.h"

namespace tracetorch::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kHostile[] = "</script><script>alert(1)</script><img src=x onerror=alert(2)>\"'&";

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// The page's data document, parsed.
simdjson::dom::element Data(const std::string& page, simdjson::dom::parser& parser) {
  const std::string open = "<script id=\"tt-data\" type=\"application/json\">";
  const size_t begin = page.find(open);
  EXPECT_NE(begin, std::string::npos);
  const size_t start = begin + open.size();
  const size_t end = page.find("</script>", start);
  simdjson::dom::element doc;
  const std::string json = page.substr(start, end - start);
  EXPECT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS);
  return doc;
}

LayerTrace Layer(std::string full_name, double latency, double std_value) {
  LayerTrace l;
  l.full_name = full_name;
  l.name = full_name.substr(full_name.rfind('.') + 1);
  l.type = "Linear";
  l.latency_ms_mean = latency;
  l.forward_count = 5;
  TensorInfo out;
  out.shape = {2, 3};
  out.stats = TensorStats{.mean = 0.0, .std = std_value, .min = -1.0, .max = 1.0};
  l.outputs.push_back(out);
  return l;
}

TraceRecord Record() {
  TraceRecord r;
  r.metadata.model_name = "<b>Net</b>";
  r.layers.push_back(Layer("blocks.0.fc", 0.5, 1.0));
  r.layers.push_back(Layer(kHostile, 0.25, 2.0));
  r.warnings.push_back(Anomaly{.type = AnomalyType::kDeadLayer,
                               .severity = AnomalySeverity::kWarning,
                               .layer = kHostile,
                               .message = kHostile,
                               .details = {}});
  r.metadata.nan_origin = NanOrigin{.layer = kHostile, .step = 3};
  return r;
}

TEST(TraceReport, AHostileLayerNameStaysData) {
  const TraceRecord r = Record();
  const std::string page =
      RenderTraceReport({.record = &r, .history = nullptr, .source = kHostile});
  // Exactly the page's own three script elements end: the data, Chart.js and ours.
  EXPECT_EQ(Count(page, "</script"), 3u);
  EXPECT_THAT(page, Not(HasSubstr("<img src=x")));
  EXPECT_THAT(page, Not(HasSubstr("<script>alert")));
  EXPECT_THAT(page, HasSubstr("<title>tracetorch report: &lt;b&gt;Net&lt;/b&gt;</title>"));
  simdjson::dom::parser parser;
  simdjson::dom::element data = Data(page, parser);
  std::string_view name;
  ASSERT_EQ(data["trace"]["layers"]["name"].at(1).get(name), simdjson::SUCCESS);
  EXPECT_EQ(name, kHostile);  // Back exactly, for the script to show as text.
  ASSERT_EQ(data["trace"]["nan_origin"]["layer"].get(name), simdjson::SUCCESS);
  EXPECT_EQ(name, kHostile);
  ASSERT_EQ(data["trace"]["source"].get(name), simdjson::SUCCESS);
  EXPECT_EQ(name, kHostile);
}

TEST(TraceReport, CarriesTheLayerColumnsAndTheHistory) {
  const TraceRecord r = Record();
  StepHistory h;
  LayerSteps& s = h.layers.emplace_back();
  s.full_name = "blocks.0.fc";
  s.steps = {0, 1, 2};
  s.latency_ms = {0.5, std::nan(""), 0.75};
  s.output_std = {1.0, 1.0, 1.0};
  s.grad_norm = {0.1, 0.2, 0.3};
  s.non_finite = {false, false, true};
  const std::string page = RenderTraceReport({.record = &r, .history = &h, .source = "run.json"});
  simdjson::dom::parser parser;
  simdjson::dom::element data = Data(page, parser);
  std::string_view kind;
  ASSERT_EQ(data["kind"].get(kind), simdjson::SUCCESS);
  EXPECT_EQ(kind, "trace");
  double v = 0;
  ASSERT_EQ(data["trace"]["layers"]["lat"].at(0).get(v), simdjson::SUCCESS);
  EXPECT_EQ(v, 0.5);
  ASSERT_EQ(data["trace"]["layers"]["std"].at(1).get(v), simdjson::SUCCESS);
  EXPECT_EQ(v, 2.0);
  simdjson::dom::element fc = data["trace"]["history"]["blocks.0.fc"];
  EXPECT_TRUE(fc["latency_ms"].at(1).is_null());  // Not measured.
  ASSERT_EQ(fc["latency_ms"].at(2).get(v), simdjson::SUCCESS);
  EXPECT_EQ(v, 0.75);
  int64_t flag = 0;
  ASSERT_EQ(fc["non_finite"].at(2).get(flag), simdjson::SUCCESS);
  EXPECT_EQ(flag, 1);
  // Without history: null.
  const std::string bare = RenderTraceReport({.record = &r, .history = nullptr, .source = ""});
  simdjson::dom::parser parser2;
  EXPECT_TRUE(Data(bare, parser2)["trace"]["history"].is_null());
}

TEST(TraceReport, DrawsTheOpGraphOrSaysWhyNot) {
  TraceRecord r = Record();
  absl::StatusOr<std::string> graph =
      ReadFileToString(std::string(TRACETORCH_FIXTURES_DIR) + "/ops/resnet18.json");
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<OpGraph> parsed = ParseOpGraphJson(*graph);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  r.op_graph = std::make_shared<const OpGraph>(*std::move(parsed));
  std::string page = RenderTraceReport({.record = &r, .history = nullptr, .source = ""});
  simdjson::dom::parser parser;
  std::string_view svg;
  ASSERT_EQ(Data(page, parser)["trace"]["op_graph_svg"].get(svg), simdjson::SUCCESS);
  EXPECT_THAT(std::string(svg), HasSubstr("<svg"));
  EXPECT_EQ(Count(page, "</script"), 3u);  // The SVG's text is escaped like the rest.

  // Without a graph: neither a picture nor an error. (A graph that does not read never reaches a
  // record: the readers refuse or drop it.)
  r.op_graph.reset();
  page = RenderTraceReport({.record = &r, .history = nullptr, .source = ""});
  simdjson::dom::parser parser2;
  EXPECT_EQ(Data(page, parser2)["trace"]["op_graph_svg"].error(), simdjson::NO_SUCH_FIELD);
  simdjson::dom::parser parser3;
  EXPECT_EQ(Data(page, parser3)["trace"]["op_graph_error"].error(), simdjson::NO_SUCH_FIELD);
}

TEST(DiffReport, VerdictSidesAndTheUnionOfLayers) {
  TraceRecord base;
  base.metadata.model_name = "Net";
  base.layers.push_back(Layer("fc", 1.0, 1.0));
  base.layers.push_back(Layer("gone", 1.0, 1.0));
  TraceRecord cur = base;
  cur.layers[0].latency_ms_mean = 2.0;
  cur.layers.pop_back();
  cur.layers.push_back(Layer(kHostile, 1.0, 1.0));
  const TraceDiff diff = DiffRecords(base, cur);
  ASSERT_TRUE(diff.has_regressions());
  StepHistory hb;
  hb.layers.push_back(LayerSteps{.full_name = "fc", .steps = {0}, .latency_ms = {1.0}});
  const std::string page = RenderDiffReport({.diff = &diff,
                                             .baseline = {&base, &hb, "baseline main"},
                                             .current = {&cur, nullptr, kHostile},
                                             .thresholds = {},
                                             .exit_status = 1});
  EXPECT_EQ(Count(page, "</script"), 3u);
  simdjson::dom::parser parser;
  simdjson::dom::element d = Data(page, parser)["diff"];
  int64_t n = 0;
  ASSERT_EQ(d["exit_status"].get(n), simdjson::SUCCESS);
  EXPECT_EQ(n, 1);
  ASSERT_EQ(d["warning"].get(n), simdjson::SUCCESS);
  EXPECT_EQ(n, diff.warning_count());
  std::vector<std::string> names, statuses;
  for (simdjson::dom::element e : d["layers"]["name"].get_array()) {
    names.emplace_back(std::string_view(e.get_string()));
  }
  for (simdjson::dom::element e : d["layers"]["status"].get_array()) {
    statuses.emplace_back(std::string_view(e.get_string()));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"fc", "gone", kHostile}));
  EXPECT_EQ(statuses, (std::vector<std::string>{"both", "removed", "added"}));
  double v = 0;
  ASSERT_EQ(d["layers"]["c_lat"].at(0).get(v), simdjson::SUCCESS);
  EXPECT_EQ(v, 2.0);
  EXPECT_TRUE(d["layers"]["c_lat"].at(1).is_null());  // Removed: no current value.
  EXPECT_FALSE(d["history_baseline"].is_null());
  EXPECT_TRUE(d["history_current"].is_null());
  std::string_view desc;
  ASSERT_EQ(d["current"]["description"].get(desc), simdjson::SUCCESS);
  EXPECT_EQ(desc, kHostile);
}

}  // namespace
}  // namespace tracetorch::report
