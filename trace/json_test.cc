#include "trace/json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "trace/atomic_file.h"
#include "trace/diff.h"
#include "trace/record.h"
#include "trace/testing/unprivileged.h"

namespace tracetorch {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string FixturePath(const std::string& relative) {
  return std::string(TRACETORCH_FIXTURES_DIR) + "/" + relative;
}

std::string ReadFixture(const std::string& relative) {
  std::ifstream in(FixturePath(relative), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "/json_test.XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The trace tests/fixtures/golden/make_small_trace.py writes; NaN where Python has None for a value
// our writer must turn into null.
TraceRecord GoldenRecord() {
  TraceRecord r;
  r.metadata.model_name = "Tiny\xc3\xa9Net \xf0\x9f\x98\x80";
  r.metadata.pytorch_version = "2.1.0";
  r.metadata.python_version = "3.11.2";
  r.metadata.platform = "Linux-x86_64";
  r.metadata.cuda_available = true;
  r.metadata.cuda_version = "12.1";
  r.metadata.active_device = "cuda:0";
  r.metadata.total_time_ms = 12.5;
  r.metadata.nan_origin = NanOrigin{"blocks.0.fc", 3, /*is_nan=*/false};
  r.metadata.extra = {
      {"dropped_events", "12"},
      {"agent", R"({"name":"tracetorch","tags":["a","b"],"ratio":0.25,"empty":{},"list":[]})"},
  };

  LayerTrace fc;
  fc.name = "fc";
  fc.type = "Linear";
  fc.full_name = "blocks.0.fc";
  fc.depth = 3;
  fc.params = 4160;
  fc.inputs.push_back(
      TensorInfo{{16, 64}, "torch.float32", "cuda:0", TensorStats{0.1, 1.0, -3.5, 3.25, 0, 0}});
  fc.outputs.push_back(TensorInfo{
      {16, 64}, "torch.float32", "cuda:0", TensorStats{kNaN, 2.0, std::nullopt, 1e20, 5, 1}});
  fc.latency_ms = 0.035;
  fc.latency_ms_min = 0.019;
  fc.latency_ms_max = 0.238;
  fc.latency_ms_mean = 0.03457165001350404;
  fc.forward_count = 20;
  fc.has_nan = true;
  fc.has_inf = true;
  fc.grad_norm = 0.16485029458999634;
  fc.grad_mean = -1e-05;
  fc.bwd_latency_ms = 0.05;
  fc.bwd_latency_ms_min = 0.04;
  fc.bwd_latency_ms_max = 0.06;
  fc.bwd_latency_ms_mean = 0.05;
  fc.backward_count = 20;
  fc.fwd_mem_alloc_delta = 1024;
  fc.fwd_mem_reserved_delta = 2097152;
  fc.bwd_mem_alloc_delta = -512;
  fc.bwd_mem_reserved_delta = 0;
  r.layers.push_back(fc);

  LayerTrace head;
  head.name = "head";
  head.type = "Linear";
  head.full_name = "head";
  head.depth = 1;
  head.params = 650;
  head.inputs.push_back(TensorInfo{{16, 64}, "torch.int64", "cpu", std::nullopt});
  r.layers.push_back(head);

  Anomaly nan;
  nan.type = AnomalyType::kNanActivation;
  nan.severity = AnomalySeverity::kCritical;
  nan.layer = "blocks.0.fc";
  nan.message = "NaN \"first\" seen\tin\n\\fc\\";
  nan.details = {
      {"none", std::monostate{}},
      {"flag", true},
      {"count", int64_t{3}},
      {"ratio", 2.5},
      {"whole", 20.0},
      {"tiny", 1.5e-300},
      {"name", std::string("x")},
      {"downstream", std::vector<std::string>{"head", "out"}},
      {"empty", std::vector<std::string>{}},
  };
  r.warnings.push_back(nan);
  Anomaly dead;
  dead.type = AnomalyType::kDeadLayer;
  dead.severity = AnomalySeverity::kWarning;
  dead.layer = "head";
  r.warnings.push_back(dead);
  return r;
}

// GoldenRecord() as it reads back: NaN statistics come back as null.
TraceRecord GoldenRecordAsRead() {
  TraceRecord r = GoldenRecord();
  r.layers[0].outputs[0].stats->mean = std::nullopt;
  return r;
}

TEST(TraceJson, WritesGoldenFileByteForByte) {
  EXPECT_EQ(TraceToJson(GoldenRecord()), ReadFixture("golden/small_trace.json"));
}

TEST(TraceJson, ReadsGoldenFile) {
  absl::StatusOr<TraceRecord> read = ReadTraceFile(FixturePath("golden/small_trace.json"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, GoldenRecordAsRead());
}

TEST(TraceJson, RoundTripsEveryFieldIndented) {
  const TraceRecord record = GoldenRecordAsRead();
  absl::StatusOr<TraceRecord> back = ParseTraceJson(TraceToJson(record));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, record);
}

TEST(TraceJson, RoundTripsEveryFieldOnOneLine) {
  const TraceRecord record = GoldenRecordAsRead();
  const std::string json = TraceToJson(record, JsonStyle{.indent = 0});
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_THAT(json, HasSubstr(R"("nan_origin":{"layer":"blocks.0.fc","step":3,"kind":"inf"})"));
  EXPECT_THAT(json, HasSubstr(R"("agent":{"name":"tracetorch","tags":["a","b"],"ratio":0.25,)"
                              R"("empty":{},"list":[]})"));
  absl::StatusOr<TraceRecord> back = ParseTraceJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, record);
}

TEST(TraceJson, OutputIsDeterministic) {
  EXPECT_EQ(TraceToJson(GoldenRecord()), TraceToJson(GoldenRecord()));
}

TEST(TraceJson, NonFiniteValuesAreWrittenAsNull) {
  TraceRecord r;
  LayerTrace l;
  l.name = l.full_name = "x";
  l.type = "ReLU";
  l.latency_ms = kInf;
  l.grad_norm = -kInf;
  l.outputs.push_back(
      TensorInfo{{1}, "torch.float32", "cpu", TensorStats{kNaN, kNaN, -kInf, kInf, 1, 2}});
  r.layers.push_back(l);
  const std::string json = TraceToJson(r, JsonStyle{.indent = 0});
  EXPECT_THAT(json, HasSubstr(R"("mean":null,"std":null,"min":null,"max":null,"nan_count":1)"));
  EXPECT_THAT(json, HasSubstr(R"("latency_ms":null)"));
  EXPECT_THAT(json, HasSubstr(R"("grad_norm":null)"));
  EXPECT_EQ(json.find("NaN"), std::string::npos);
  EXPECT_EQ(json.find("Infinity"), std::string::npos);
  absl::StatusOr<TraceRecord> back = ParseTraceJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->layers[0].outputs[0].stats->mean.has_value());
  EXPECT_FALSE(back->layers[0].latency_ms.has_value());
}

// Doubles are written as Python's repr() writes them, so our files match the library's.
TEST(TraceJson, WritesDoublesLikePython) {
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {20.0, "20.0"},
      {0.1, "0.1"},
      {0.0001, "0.0001"},
      {1e-05, "1e-05"},
      {-2.5e-300, "-2.5e-300"},
      {1e15, "1000000000000000.0"},
      {1e16, "1e+16"},
      {1.5e16, "1.5e+16"},
      {123456789.125, "123456789.125"},
      {10768.319743000007, "10768.319743000007"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {5e-324, "5e-324"},
  };
  for (const auto& [value, text] : cases) {
    TraceRecord r;
    r.metadata.total_time_ms = value;
    EXPECT_THAT(TraceToJson(r, JsonStyle{.indent = 0}),
                HasSubstr("\"total_time_ms\":" + text + "}"))
        << text;
  }
}

TEST(TraceJson, EscapesStringsAsAsciiLikePython) {
  std::string out;
  AppendJsonString(std::string("a\"b\\c\n\r\t\b\f\x01\x1f\x7f", 13), &out);
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\"");
  out.clear();
  AppendJsonString("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", &out);
  EXPECT_EQ(out, "\"\\u00e9\\u20ac\\ud83d\\ude00\"");
  out.clear();
  AppendJsonString("bad\xff\xc3", &out);  // Not UTF-8: one U+FFFD per bad byte.
  EXPECT_EQ(out, "\"bad\\ufffd\\ufffd\"");
}

TEST(TraceJson, ParsesEveryUpstreamTraceAndRewritesItIdentically) {
  for (const std::string name : {"upstream/example_trace.json", "upstream/train_trace.json",
                                 "upstream/train_trace_perturbed.json"}) {
    SCOPED_TRACE(name);
    const std::string text = ReadFixture(name);
    absl::StatusOr<TraceRecord> record = ParseTraceJson(text);
    ASSERT_TRUE(record.ok()) << record.status();
    // Same layout, same key order, same number spelling as json.dump(indent=2).
    EXPECT_EQ(TraceToJson(*record), text);
    absl::StatusOr<TraceRecord> again = ParseTraceJson(TraceToJson(*record));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, *record);
  }
}

TEST(TraceJson, ReadsUpstreamTrainTraceContents) {
  absl::StatusOr<TraceRecord> r = ReadTraceFile(FixturePath("upstream/train_trace.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->metadata.model_name, "TrainNet");
  EXPECT_FALSE(r->metadata.cuda_available);
  EXPECT_EQ(r->metadata.cuda_version, "N/A");
  EXPECT_TRUE(r->metadata.extra.empty());
  ASSERT_EQ(r->layers.size(), 11u);
  const LayerTrace* stem = r->FindLayer("stem");
  ASSERT_NE(stem, nullptr);
  EXPECT_EQ(stem->type, "Linear");
  EXPECT_EQ(stem->params, 2112);
  EXPECT_EQ(stem->forward_count, 20);
  EXPECT_EQ(stem->backward_count, 20);
  ASSERT_EQ(stem->outputs.size(), 1u);
  EXPECT_EQ(stem->outputs[0].shape, (std::vector<int64_t>{16, 64}));
  ASSERT_TRUE(stem->outputs[0].stats.has_value());
  EXPECT_NEAR(*stem->outputs[0].stats->std, 0.5656893849372864, 1e-12);
  EXPECT_FALSE(stem->fwd_mem_alloc_delta.has_value());
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0].type, AnomalyType::kExplodingVariance);
  EXPECT_EQ(r->warnings[0].severity, AnomalySeverity::kWarning);
  EXPECT_EQ(r->warnings[0].layer, "norm");
  const DetailValue* ratio = FindDetail(r->warnings[0].details, "ratio");
  ASSERT_NE(ratio, nullptr);
  EXPECT_DOUBLE_EQ(std::get<double>(*ratio), 14.675527506733395);
}

TEST(TraceJson, KeepsIntegerStatsOfNonFloatTensorsAsNull) {
  absl::StatusOr<TraceRecord> r = ReadTraceFile(FixturePath("upstream/example_trace.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  const TensorInfo& ids = r->layers[0].inputs[0];
  EXPECT_EQ(ids.dtype, "torch.int64");
  ASSERT_TRUE(ids.stats.has_value());
  EXPECT_FALSE(ids.stats->mean.has_value());
  EXPECT_EQ(ids.stats->nan_count, 0);
  // The library's 0.0 for a layer that never ran a backward reads as not measured.
  EXPECT_EQ(r->layers[0].backward_count, 0);
  EXPECT_FALSE(r->layers[0].bwd_latency_ms.has_value());
  EXPECT_FALSE(r->layers[0].bwd_latency_ms_min.has_value());
}

TEST(TraceJson, AcceptsPythonNonFiniteTokens) {
  const std::string text = R"({
  "metadata": {"model_name": "m", "total_time_ms": NaN, "odd": [NaN, Infinity, "NaN"]},
  "layers": [{"name": "a", "type": "T",
              "outputs": [{"shape": [2], "dtype": "torch.float32", "device": "cpu",
                           "mean": NaN, "std": Infinity, "min": -Infinity, "max": 1e400,
                           "nan_count": 1, "inf_count": 2}],
              "latency_ms": 1.5, "grad_norm": NaN}],
  "warnings": [{"type": "nan_activation", "severity": "critical", "layer": "a",
                "message": "NaN seen, Infinity too", "details": {"x": -Infinity, "s": "NaN"}}]
})";
  absl::StatusOr<TraceRecord> r = ParseTraceJson(text);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(std::isnan(*r->metadata.total_time_ms));
  const TensorStats& s = *r->layers[0].outputs[0].stats;
  EXPECT_TRUE(std::isnan(*s.mean));
  EXPECT_EQ(*s.std, kInf);
  EXPECT_EQ(*s.min, -kInf);
  EXPECT_EQ(*s.max, kInf);  // 1e400 overflows to inf, as in Python.
  EXPECT_TRUE(std::isnan(*r->layers[0].grad_norm));
  EXPECT_EQ(r->warnings[0].message, "NaN seen, Infinity too");
  EXPECT_EQ(std::get<double>(*FindDetail(r->warnings[0].details, "x")), -kInf);
  EXPECT_EQ(std::get<std::string>(*FindDetail(r->warnings[0].details, "s")), "NaN");
  // Unknown metadata is kept, with non-finite numbers as null (strict output).
  ASSERT_EQ(r->metadata.extra.size(), 1u);
  EXPECT_EQ(r->metadata.extra[0].second, R"([null,null,"NaN"])");
  // What we write back is standard JSON.
  const std::string out = TraceToJson(*r);
  EXPECT_EQ(out.find("NaN,"), std::string::npos);
  EXPECT_TRUE(ParseTraceJson(out).ok());
}

TEST(TraceJson, ReadsSeveralFilesThroughOneBufferInOrder) {
  // The files share a read buffer and a parser: a small file after a large one must not see the
  // large one's bytes, a larger one after a smaller one must be read whole, a file that Python's
  // tokens make go the slow (rewriting) way reads like any other, and a failure stays with its
  // own path.
  TempDir dir;
  const TraceRecord big = GoldenRecord();
  TraceRecord small;
  small.metadata.model_name = "Small";
  small.layers.push_back(big.layers.front());
  TraceRecord bigger = big;
  bigger.metadata.model_name = "Bigger";
  bigger.layers.push_back(big.layers.front());
  bigger.layers.back().full_name = "extra";
  ASSERT_TRUE(WriteTraceFile(dir.path() + "/big.json", big).ok());
  ASSERT_TRUE(WriteTraceFile(dir.path() + "/small.json", small).ok());
  ASSERT_TRUE(WriteTraceFile(dir.path() + "/bigger.json", bigger).ok());
  {
    std::ofstream python(dir.path() + "/python.json");
    python << R"({"metadata": {"model_name": "Py", "total_time_ms": NaN}, "layers": []})";
  }
  const std::vector<std::string> paths = {dir.path() + "/big.json",     dir.path() + "/small.json",
                                          dir.path() + "/missing.json", dir.path() + "/bigger.json",
                                          dir.path() + "/python.json",  dir.path() + "/small.json"};
  const std::vector<absl::StatusOr<TraceRecord>> read = ReadTraceFiles(paths);
  ASSERT_EQ(read.size(), paths.size());
  ASSERT_TRUE(read[0].ok()) << read[0].status();
  EXPECT_EQ(TraceToJson(*read[0]), TraceToJson(big));
  ASSERT_TRUE(read[1].ok()) << read[1].status();
  EXPECT_EQ(TraceToJson(*read[1]), TraceToJson(small));
  EXPECT_EQ(read[2].status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(read[3].ok()) << read[3].status();
  EXPECT_EQ(TraceToJson(*read[3]), TraceToJson(bigger));
  ASSERT_TRUE(read[4].ok()) << read[4].status();
  EXPECT_EQ(read[4]->metadata.model_name, "Py");
  EXPECT_TRUE(std::isnan(*read[4]->metadata.total_time_ms));
  ASSERT_TRUE(read[5].ok()) << read[5].status();
  EXPECT_EQ(TraceToJson(*read[5]), TraceToJson(small));
  EXPECT_TRUE(ReadTraceFiles({}).empty());
}

TEST(TraceJson, NonFiniteTokenIsNotAString) {
  absl::StatusOr<TraceRecord> r = ParseTraceJson(R"({"layers": [{"name": NaN, "type": "T"}]})");
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r.status()), HasSubstr("layers[0].name: expected a string"));
}

TEST(TraceJson, ToleratesBigIntegersAndLoneSurrogates) {
  absl::StatusOr<TraceRecord> r = ParseTraceJson(
      R"({"metadata": {"big": 123456789012345678901234567890}, "layers": [{"name": "a\ud800b", "type": "T"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->metadata.extra[0].second, "1.2345678901234568e+29");
  EXPECT_EQ(r->layers[0].name,
            "a\xef\xbf\xbd"
            "b");
}

TEST(TraceJson, FillsDefaultsForOlderFiles) {
  const std::string text = R"({
  "metadata": {"model_name": "Old"},
  "layers": [
    {"name": "fc", "type": "Linear", "inputs": [], "outputs": [],
     "latency_ms": 2.5, "bwd_latency_ms": 4.0, "grad_norm": 0.5},
    {"name": "act", "type": "ReLU", "latency_ms": null}
  ]
})";
  absl::StatusOr<TraceRecord> r = ParseTraceJson(text);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->layers.size(), 2u);
  const LayerTrace& fc = r->layers[0];
  EXPECT_EQ(fc.full_name, "fc");
  EXPECT_EQ(fc.depth, 0);
  EXPECT_EQ(fc.params, 0);
  EXPECT_EQ(fc.forward_count, 1);
  EXPECT_EQ(fc.latency_ms_min, 2.5);
  EXPECT_EQ(fc.latency_ms_max, 2.5);
  EXPECT_EQ(fc.latency_ms_mean, 2.5);
  EXPECT_EQ(fc.backward_count, 1);
  EXPECT_EQ(fc.bwd_latency_ms_min, 4.0);
  EXPECT_EQ(fc.bwd_latency_ms_mean, 4.0);
  EXPECT_FALSE(fc.fwd_mem_alloc_delta.has_value());
  const LayerTrace& act = r->layers[1];
  EXPECT_EQ(act.forward_count, 0);
  EXPECT_EQ(act.backward_count, 0);
  EXPECT_FALSE(act.latency_ms_mean.has_value());
  EXPECT_TRUE(r->warnings.empty());
  EXPECT_EQ(r->metadata.cuda_version, "N/A");
}

TEST(TraceJson, IgnoresUnknownLayerKeysAndAcceptsAnyKeyOrder) {
  absl::StatusOr<TraceRecord> r = ParseTraceJson(
      R"({"warnings": [], "layers": [{"future": {"x": [1]}, "type": "T", "depth": 2,
          "name": "b", "full_name": "a.b", "forward_count": 3}], "metadata": {}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->layers[0].full_name, "a.b");
  EXPECT_EQ(r->layers[0].depth, 2);
  EXPECT_EQ(r->layers[0].forward_count, 3);
}

// A file written by another tool or a newer version may carry checks we do not know: the warning
// is kept with its spelling, written back as it was, and a reader can say so.
TEST(TraceJson, KeepsWarningsOfUnknownType) {
  const std::string text = R"({"layers": [], "warnings": [
    {"type": "test", "severity": "info", "layer": "x", "message": "m"},
    {"type": "dead_layer", "severity": "warning", "layer": "y", "message": "d"},
    {"type": "test", "severity": "critical", "layer": "z", "message": "n"},
    {"type": "drift", "severity": "info", "layer": "w", "message": "o"}]})";
  absl::StatusOr<TraceRecord> r = ParseTraceJson(text);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->warnings.size(), 4u);
  EXPECT_EQ(r->warnings[0].type, AnomalyType::kUnknown);
  EXPECT_EQ(r->warnings[0].unknown_type, "test");
  EXPECT_EQ(TypeName(r->warnings[0]), "test");
  EXPECT_EQ(r->warnings[0].layer, "x");
  EXPECT_EQ(r->warnings[1].type, AnomalyType::kDeadLayer);
  EXPECT_EQ(TypeName(r->warnings[1]), "dead_layer");
  EXPECT_EQ(UnknownAnomalyTypes(*r), (std::vector<std::string>{"test", "drift"}));
  EXPECT_EQ(DescribeUnknownAnomalyTypes(*r),
            "warnings of unknown type kept as they are: \"test\", \"drift\"");
  EXPECT_THAT(TraceToJson(*r), HasSubstr(R"("type": "test")"));
  absl::StatusOr<TraceRecord> again = ParseTraceJson(TraceToJson(*r));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *r);
  EXPECT_EQ(DescribeUnknownAnomalyTypes(TraceRecord{}), "");
}

// capture_stats=False: no statistics (the library's layout: no stat keys), the counts apart.
TEST(TraceJson, WritesCountsWithoutStatisticsApart) {
  TraceRecord r;
  LayerTrace& l = r.layers.emplace_back();
  l.name = l.type = l.full_name = "a";
  TensorInfo t;
  t.shape = {2};
  t.dtype = "torch.float32";
  t.device = "cpu";
  t.nonfinite = NonFiniteCounts{.nan_count = 2, .inf_count = 1};
  l.outputs.push_back(t);
  const std::string text = TraceToJson(r, JsonStyle{.indent = 0});
  EXPECT_THAT(text, HasSubstr(R"("device":"cpu","nonfinite":{"nan_count":2,"inf_count":1}})"));
  EXPECT_THAT(text, Not(HasSubstr("\"mean\"")));
  absl::StatusOr<TraceRecord> back = ParseTraceJson(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  EXPECT_FALSE(back->layers[0].outputs[0].stats.has_value());
  EXPECT_EQ(NanCount(back->layers[0].outputs[0]), 2);
  EXPECT_EQ(InfCount(back->layers[0].outputs[0]), 1);
  // Statistics, when present, hold the counts: a "nonfinite" beside them is dropped.
  absl::StatusOr<TraceRecord> both = ParseTraceJson(
      R"({"layers": [{"name": "a", "type": "T", "outputs": [{"shape": [1], "nan_count": 3,
          "nonfinite": {"nan_count": 9}}]}]})");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(NanCount(both->layers[0].outputs[0]), 3);
  EXPECT_FALSE(both->layers[0].outputs[0].nonfinite.has_value());
  absl::StatusOr<TraceRecord> bad = ParseTraceJson(
      R"({"layers": [{"name": "a", "type": "T", "outputs": [{"shape": [1], "nonfinite": 3}]}]})");
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(bad.status()), "layers[0].outputs[0].nonfinite: expected an object");
}

// The library writes 0.0 for the latency of a pass a layer never ran, and its tools compare it
// with 0: we write the same, and read it back as not measured.
TEST(TraceJson, LatencyOfAPassNeverRunIsZeroInTheFile) {
  TraceRecord r;
  LayerTrace& l = r.layers.emplace_back();
  l.name = l.type = l.full_name = "a";
  l.latency_ms = l.latency_ms_min = l.latency_ms_max = l.latency_ms_mean = 0.5;
  l.forward_count = 1;
  const std::string text = TraceToJson(r, JsonStyle{.indent = 0});
  EXPECT_THAT(text, HasSubstr(R"("latency_ms":0.5,)"));
  EXPECT_THAT(text, HasSubstr(R"("bwd_latency_ms":0.0,"bwd_latency_ms_min":null)"));
  absl::StatusOr<TraceRecord> back = ParseTraceJson(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  // A measured 0.0 (a call was counted) stays 0.0.
  absl::StatusOr<TraceRecord> measured = ParseTraceJson(
      R"({"layers": [{"name": "a", "type": "T", "latency_ms": 0.0, "forward_count": 2}]})");
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(measured->layers[0].latency_ms, 0.0);
  // Without a count, 0.0 counts no call (as the library reads it).
  absl::StatusOr<TraceRecord> old = ParseTraceJson(
      R"({"layers": [{"name": "a", "type": "T", "latency_ms": 0.0, "bwd_latency_ms": 0.0}]})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->layers[0].forward_count, 0);
  EXPECT_EQ(old->layers[0].backward_count, 0);
  EXPECT_FALSE(old->layers[0].latency_ms.has_value());
  EXPECT_FALSE(old->layers[0].bwd_latency_ms_mean.has_value());
}

// ---- Errors.

void ExpectSyntaxError(const std::string& text, const std::string& where, const std::string& what) {
  SCOPED_TRACE(text);
  absl::StatusOr<TraceRecord> r = ParseTraceJson(text);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(Message(r.status()), HasSubstr(where));
  EXPECT_THAT(Message(r.status()), HasSubstr(what));
}

TEST(TraceJsonErrors, EmptyFile) {
  ExpectSyntaxError("", "file is empty", "");
  ExpectSyntaxError(" \n\t ", "file is empty", "");
}

TEST(TraceJsonErrors, TruncatedFileNamesLineAndColumn) {
  const std::string text = ReadFixture("upstream/train_trace.json");
  // Cut after "line 3" of the document: `{\n  "metadata": {\n    "model_name": "Tr`.
  const size_t cut = text.find("TrainNet") + 2;
  ExpectSyntaxError(text.substr(0, cut), "line 3, column 19", "unterminated string");
  ExpectSyntaxError(text.substr(0, text.size() / 2), "line ", "unexpected end of input");
  ExpectSyntaxError(text.substr(0, text.size() - 1), "line 709, column 1",
                    "unexpected end of input");
}

TEST(TraceJsonErrors, NotJson) {
  ExpectSyntaxError("hello", "line 1, column 1", "unexpected character 'h'");
  ExpectSyntaxError("<html></html>", "line 1, column 1", "unexpected character '<'");
  ExpectSyntaxError("\xef\xbb\xbf{}", "line 1, column 1", "unexpected byte 0xef");
}

TEST(TraceJsonErrors, PointsAtTheBadToken) {
  ExpectSyntaxError("{\n  \"a\": 1,\n  \"b\": tru\n}", "line 3, column 8",
                    "unexpected character 't'");
  ExpectSyntaxError("{\"layers\": [1, 2,]}", "line 1, column 18", "unexpected character ']'");
  ExpectSyntaxError("{\"layers\": []} x", "line 1, column 16", "after the end of the document");
  ExpectSyntaxError("{\"layers\" []}", "line 1, column 11", "expected ':'");
  ExpectSyntaxError("{\"layers\": [] \"x\": 1}", "line 1, column 15", "expected ',' or '}'");
  ExpectSyntaxError("{layers: []}", "line 1, column 2", "expected a string key");
  ExpectSyntaxError("{\"a\": 01}", "line 1, column 8", "leading zero");
  ExpectSyntaxError("{\"a\": 1.}", "line 1, column 9", "expected a digit");
  // Columns count characters, not bytes.
  ExpectSyntaxError("{\"\xc3\xa9\xc3\xa9\": x}", "line 1, column 8", "unexpected character 'x'");
}

TEST(TraceJsonErrors, BadStrings) {
  ExpectSyntaxError("{\"a\": \"x\\qy\"}", "line 1, column 9", "invalid escape");
  ExpectSyntaxError("{\"a\": \"\\u12G4\"}", "line 1, column 8", "invalid \\u escape");
  ExpectSyntaxError("{\"a\": \"x\ny\"}", "line 1, column 9", "control character");
  ExpectSyntaxError("{\"a\": \"x\xff\"}", "line 1, column 9", "invalid UTF-8");
}

TEST(TraceJsonErrors, TooDeep) {
  ExpectSyntaxError(std::string(5000, '['), "line 1, column 1025", "nesting too deep");
}

// Truncations and byte flips of a real trace: each one parses or fails with InvalidArgument naming
// a position or a field, and never crashes (this test also runs under the sanitizers).
TEST(TraceJsonErrors, MutatedTracesFailCleanly) {
  const std::string text = ReadFixture("upstream/example_trace.json");
  uint64_t state = 12345;
  const auto next = [&state] {
    state = state * 6364136223846793005u + 1442695040888963407u;
    return state >> 33;
  };
  static constexpr char kBytes[] = "{}[]\",:0-9.eE NIaf\\u\n\x80\xff";
  for (int i = 0; i < 3000; ++i) {
    std::string mutated = text;
    if (i % 3 == 0) {
      mutated.resize(next() % mutated.size());
    } else {
      for (int k = 0; k < 1 + i % 4; ++k) {
        mutated[next() % mutated.size()] = kBytes[next() % (sizeof(kBytes) - 1)];
      }
    }
    absl::StatusOr<TraceRecord> r = ParseTraceJson(mutated);
    if (r.ok()) continue;
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    const std::string message = Message(r.status());
    const bool positioned = message.rfind("line ", 0) == 0 || message == "file is empty";
    const bool field = message.find(": ") != std::string::npos;
    EXPECT_TRUE(positioned || field) << message;
  }
}

void ExpectShapeError(const std::string& text, const std::string& message) {
  SCOPED_TRACE(text);
  absl::StatusOr<TraceRecord> r = ParseTraceJson(text);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(Message(r.status()), message);
}

TEST(TraceJsonErrors, WrongShapesNameTheField) {
  const std::string layer = R"({"name": "a", "type": "T"})";
  ExpectShapeError(R"({"layers": [)" + layer + "," + layer + "," +
                       R"({"name": "c", "type": "T", "outputs": [{"shape": "16x64"}]}]})",
                   "layers[2].outputs[0].shape: expected an array of integers");
  ExpectShapeError(R"({"layers": [{"name": "c", "type": "T", "inputs": [{"shape": [1, 2.5]}]}]})",
                   "layers[0].inputs[0].shape: expected an array of integers");
  ExpectShapeError("[]", "document: expected an object");
  ExpectShapeError("{}", "layers: missing");
  ExpectShapeError(R"({"layers": {}})", "layers: expected an array");
  ExpectShapeError(R"({"layers": [3]})", "layers[0]: expected an object");
  ExpectShapeError(R"({"layers": [{"type": "T"}]})", "layers[0].name: missing");
  ExpectShapeError(R"({"layers": [{"name": "a", "type": "T", "latency_ms": "fast"}]})",
                   "layers[0].latency_ms: expected a number or null");
  ExpectShapeError(R"({"layers": [{"name": "a", "type": "T", "has_nan": 0}]})",
                   "layers[0].has_nan: expected true or false");
  ExpectShapeError(R"({"layers": [{"name": "a", "type": "T", "depth": 1e10}]})",
                   "layers[0].depth: integer out of range");
  ExpectShapeError(R"({"layers": [{"name": "a", "type": "T", "params": 1.5}]})",
                   "layers[0].params: expected an integer");
  ExpectShapeError(R"({"layers": [{"name": "a", "type": "T", "fwd_mem_alloc_delta": true}]})",
                   "layers[0].fwd_mem_alloc_delta: expected an integer or null");
  ExpectShapeError(R"({"metadata": {"cuda_available": "no"}, "layers": []})",
                   "metadata.cuda_available: expected true or false");
  ExpectShapeError(R"({"metadata": {"nan_origin": {"layer": "a", "kind": "boom"}}, "layers": []})",
                   "metadata.nan_origin.kind: expected \"nan\" or \"inf\"");
  ExpectShapeError(
      R"({"layers": [], "warnings": [{"type": "dead_layer", "severity": "info", "details": {"a": {}}}]})",
      "warnings[0].details.a: expected null, a boolean, a number, a string or an array of strings");
  ExpectShapeError(
      R"({"layers": [], "warnings": [{"type": "dead_layer", "severity": "info", "details": {"a": [1]}}]})",
      "warnings[0].details.a: expected an array of strings");
}

TEST(TraceJsonErrors, FileErrors) {
  TempDir dir;
  EXPECT_EQ(ReadTraceFile(dir.path() + "/nope.json").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadTraceFile(dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
  const std::string empty = dir.path() + "/empty.json";
  ASSERT_TRUE(WriteFileAtomic(empty, "").ok());
  absl::StatusOr<TraceRecord> r = ReadTraceFile(empty);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(r.status()), "file is empty");

  const std::string secret = dir.path() + "/secret.json";
  ASSERT_TRUE(WriteTraceFile(secret, GoldenRecord()).ok());
  ASSERT_EQ(::chmod(secret.c_str(), 0), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  testing::ExpectAsUnprivileged(
      [&] { return ReadTraceFile(secret).status().code() == absl::StatusCode::kPermissionDenied; });
}

TEST(TraceJson, WriteTraceFileRoundTrips) {
  TempDir dir;
  const std::string path = dir.path() + "/t.json";
  ASSERT_TRUE(WriteTraceFile(path, GoldenRecord()).ok());
  absl::StatusOr<std::string> text = ReadFileToString(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, TraceToJson(GoldenRecord()));
  EXPECT_EQ(WriteTraceFile(dir.path() + "/missing/t.json", GoldenRecord()).code(),
            absl::StatusCode::kNotFound);
}

TEST(TraceJson, WriteAnomalyJsonWritesWhatARecordsWarningsHold) {
  TraceRecord r;
  r.warnings.push_back(Anomaly{AnomalyType::kDeadLayer,
                               AnomalySeverity::kWarning,
                               "blocks.0.fc",
                               "Dead layer",
                               {{"mean", 0.0}, {"downstream", std::vector<std::string>{"a"}}}});
  std::string out;
  JsonWriter w(/*indent=*/0, &out);
  WriteAnomalyJson(r.warnings[0], w);
  w.Finish();
  EXPECT_EQ(out, R"({"type":"dead_layer","severity":"warning","layer":"blocks.0.fc",)"
                 R"("message":"Dead layer","details":{"mean":0.0,"downstream":["a"]}})");
  EXPECT_NE(TraceToJson(r, {0}).find(R"("warnings":[)" + out + "]"), std::string::npos);
}

TEST(DiffJson, WritesTheUpstreamLayout) {
  TraceDiff diff;
  diff.baseline_model = "A";
  diff.current_model = "B";
  diff.entries.push_back(DiffEntry{DiffSeverity::kWarning,
                                   DiffKind::kLatencyRegression,
                                   "stem",
                                   "Latency regression: 0.035ms -> 0.046ms (+34.4%)",
                                   {{"baseline_ms", 0.03457165001350404},
                                    {"current_ms", 0.0464809499931107},
                                    {"relative", 0.3444816771821641},
                                    {"baseline_count", int64_t{20}},
                                    {"current_count", int64_t{20}}}});
  diff.entries.push_back(DiffEntry{DiffSeverity::kInfo, DiffKind::kLayerAdded, "x", "Added", {}});
  const std::string expected = R"json({
  "baseline_model": "A",
  "current_model": "B",
  "has_regressions": true,
  "critical_count": 0,
  "warning_count": 1,
  "entries": [
    {
      "severity": "warning",
      "kind": "latency_regression",
      "layer": "stem",
      "message": "Latency regression: 0.035ms -> 0.046ms (+34.4%)",
      "details": {
        "baseline_ms": 0.03457165001350404,
        "current_ms": 0.0464809499931107,
        "relative": 0.3444816771821641,
        "baseline_count": 20,
        "current_count": 20
      }
    },
    {
      "severity": "info",
      "kind": "layer_added",
      "layer": "x",
      "message": "Added",
      "details": {}
    }
  ]
})json";
  EXPECT_EQ(DiffToJson(diff), expected);
  // The first entry is the upstream diff fixture's first entry, spelled the same way.
  EXPECT_THAT(
      ReadFixture("upstream/diff_train_vs_perturbed.json"),
      HasSubstr(expected.substr(expected.find("    {\n      \"severity\": \"warning\""),
                                expected.find("    },\n    {\n      \"severity\": \"info\"") -
                                    expected.find("    {\n      \"severity\": \"warning\""))));
  EXPECT_EQ(DiffToJson(TraceDiff{}, JsonStyle{.indent = 0}),
            R"({"baseline_model":"","current_model":"","has_regressions":false,)"
            R"("critical_count":0,"warning_count":0,"entries":[]})");
}

}  // namespace
}  // namespace tracetorch
