#include "protocol/record_proto.h"

#include <cmath>
#include <memory>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "trace/op_graph.h"
#include "trace/op_graph_json.h"

namespace tracetorch {
namespace {

TraceRecord Sample() {
  TraceRecord r;
  r.metadata.model_name = "Net";
  r.metadata.pytorch_version = "1.13.1";
  r.metadata.total_time_ms = 12.5;
  r.metadata.nan_origin = NanOrigin{"fc", 3, false};
  r.metadata.extra = {{"dropped_events", "12"}, {"note", "\"x\""}};
  LayerTrace l;
  l.name = "fc";
  l.type = "Linear";
  l.full_name = "block.fc";
  l.depth = 2;
  l.params = 110;
  l.inputs.push_back({{4, 10}, "torch.float32", "cpu", TensorStats{0.5, 1.0, -2.0, 3.0, 0, 0}});
  l.outputs.push_back({{4, 10}, "torch.float32", "cuda:0", std::nullopt});
  l.latency_ms = 0.25;
  l.latency_ms_min = 0.0;  // Present zero must survive.
  l.forward_count = 3;
  l.has_inf = true;
  l.grad_norm = 1.5;
  l.has_zero_grad = true;
  l.backward_count = 1;
  l.bwd_mem_alloc_delta = -512;
  r.layers.push_back(l);
  Anomaly a;
  a.type = AnomalyType::kNanGradient;
  a.severity = AnomalySeverity::kCritical;
  a.layer = "block.fc";
  a.message = "NaN gradient";
  a.details = {{"n", DetailValue(int64_t{3})},
               {"none", DetailValue(std::monostate())},
               {"ratio", DetailValue(2.5)},
               {"ok", DetailValue(true)},
               {"s", DetailValue(std::string("x"))},
               {"list", DetailValue(std::vector<std::string>{"a", "b"})}};
  r.warnings.push_back(a);
  return r;
}

TEST(RecordProto, RoundTripIsLossless) {
  const TraceRecord r = Sample();
  v1::TraceRecord p;
  ToProto(r, &p);
  EXPECT_TRUE(p.layers(0).has_latency_ms_min());
  EXPECT_FALSE(p.layers(0).has_latency_ms_max());
  EXPECT_FALSE(p.layers(0).outputs(0).has_stats());
  EXPECT_EQ(p.warnings(0).type(), v1::ANOMALY_TYPE_NAN_GRADIENT);
  EXPECT_EQ(FromProto(p), r);
}

TEST(RecordProto, KeepsUnknownAnomalyTypesAndCountsWithoutStatistics) {
  TraceRecord r = Sample();
  r.layers[0].outputs[0].nonfinite = NonFiniteCounts{.nan_count = 4, .inf_count = 1};
  Anomaly a;
  a.type = AnomalyType::kUnknown;
  a.unknown_type = "test";
  a.severity = AnomalySeverity::kInfo;
  a.layer = "x";
  r.warnings.push_back(a);
  v1::TraceRecord p;
  ToProto(r, &p);
  EXPECT_EQ(p.warnings(1).type(), v1::ANOMALY_TYPE_UNSPECIFIED);
  EXPECT_EQ(p.warnings(1).unknown_type(), "test");
  EXPECT_EQ(p.layers(0).outputs(0).nonfinite().nan_count(), 4);
  EXPECT_EQ(FromProto(p), r);
}

TEST(RecordProto, SurvivesSerialization) {
  const TraceRecord r = Sample();
  v1::TraceRecord p;
  ToProto(r, &p);
  v1::TraceRecord parsed;
  ASSERT_TRUE(parsed.ParseFromString(p.SerializeAsString()));
  EXPECT_EQ(FromProto(parsed), r);
}

TEST(RecordProto, CarriesTheOpGraphAsItsDocument) {
  OpGraph g;
  g.model_name = "Net";
  g.source = "eager";
  g.step = 3;
  ModulePass root;
  root.type = "Net";
  g.modules = {root};
  OpNode op;
  op.label = "log_1_1";
  op.func_name = "log";
  op.op_name = "aten::log";
  op.call_index = 1;
  op.index = 1;
  op.module_pass = 0;
  op.outputs.push_back({{2}, "torch.float32", "cpu", std::nullopt});
  g.ops = {op};
  g.nan_origin = 0;
  TraceRecord r = Sample();
  r.op_graph = std::make_shared<const OpGraph>(g);
  v1::TraceRecord p;
  ToProto(r, &p);
  EXPECT_EQ(p.op_graph_json(), OpGraphToJson(g, 0));  // The wire form: the minified document.
  const TraceRecord back = FromProto(p);
  ASSERT_NE(back.op_graph, nullptr);
  EXPECT_EQ(*back.op_graph, g);
  EXPECT_EQ(back, r);

  // None: no bytes; bytes that are not an op graph: dropped.
  r.op_graph.reset();
  v1::TraceRecord none;
  ToProto(r, &none);
  EXPECT_TRUE(none.op_graph_json().empty());
  none.set_op_graph_json("{not json");
  EXPECT_EQ(FromProto(none).op_graph, nullptr);
  EXPECT_EQ(FromProto(none), r);
}

TEST(RecordProto, DiffRoundTripIsLossless) {
  TraceDiff d;
  d.baseline_model = "Net";
  d.current_model = "Net2";
  DiffEntry shape{DiffSeverity::kCritical,
                  DiffKind::kShapeChange,
                  "fc",
                  "Output shape changed",
                  {{"baseline", DetailValue(std::string("[4, 10]"))}}};
  DiffEntry latency{DiffSeverity::kWarning,
                    DiffKind::kLatencyRegression,
                    "fc",
                    "Latency regression",
                    {{"baseline_ms", DetailValue(0.5)},
                     {"current_count", DetailValue(int64_t{7})},
                     {"rule", DetailValue(std::string("median+iqr"))}}};
  DiffEntry resolved{DiffSeverity::kInfo, DiffKind::kResolvedAnomaly, "act", "Resolved", {}};
  d.entries = {shape, latency, resolved};
  v1::TraceDiff p;
  ToProto(d, &p);
  EXPECT_EQ(p.entries(0).kind(), v1::DIFF_KIND_SHAPE_CHANGE);
  EXPECT_EQ(p.entries(0).severity(), v1::SEVERITY_CRITICAL);
  EXPECT_EQ(p.entries(1).kind(), v1::DIFF_KIND_LATENCY_REGRESSION);
  EXPECT_EQ(p.entries(2).kind(), v1::DIFF_KIND_RESOLVED_ANOMALY);
  EXPECT_TRUE(p.has_regressions());
  EXPECT_EQ(p.critical_count(), 1);
  EXPECT_EQ(p.warning_count(), 1);
  v1::TraceDiff parsed;
  ASSERT_TRUE(parsed.ParseFromString(p.SerializeAsString()));
  const TraceDiff back = FromProto(parsed);
  EXPECT_EQ(back.baseline_model, "Net");
  EXPECT_EQ(back.current_model, "Net2");
  EXPECT_EQ(back.entries, d.entries);
}

TEST(RecordProto, EveryDiffKindMapsOneToOne) {
  for (int k = 0; k <= static_cast<int>(DiffKind::kResolvedAnomaly); ++k) {
    TraceDiff d;
    d.entries.push_back({DiffSeverity::kInfo, static_cast<DiffKind>(k), "l", "m", {}});
    v1::TraceDiff p;
    ToProto(d, &p);
    EXPECT_EQ(v1::DiffKind_Name(p.entries(0).kind()).substr(10),
              absl::AsciiStrToUpper(std::string(ToString(static_cast<DiffKind>(k)))));
    EXPECT_EQ(FromProto(p).entries[0].kind, static_cast<DiffKind>(k));
  }
}

TEST(RecordProto, LatencySamplesFromHistoryDropsUnknownSteps) {
  google::protobuf::RepeatedPtrField<v1::LayerHistory> history;
  v1::LayerHistory* h = history.Add();
  h->set_full_name("fc");
  for (double v : {0.5, std::nan(""), 0.7}) h->add_latency_ms(v);
  history.Add()->set_full_name("act");
  const LatencySamples s = LatencySamplesFromHistory(history);
  ASSERT_EQ(s.by_layer.size(), 2u);
  EXPECT_EQ(s.by_layer.at("fc"), (std::vector<double>{0.5, 0.7}));
  EXPECT_TRUE(s.by_layer.at("act").empty());
}

TEST(RecordProto, StepHistoryFromProtoKeepsEveryPoint) {
  google::protobuf::RepeatedPtrField<v1::LayerHistory> history;
  v1::LayerHistory* h = history.Add();
  h->set_full_name("blocks.0.fc");
  for (uint64_t s : {3u, 5u, 6u}) h->add_steps(s);
  for (double v : {0.5, std::nan(""), 0.7}) h->add_latency_ms(v);
  for (double v : {1.0, 2.0, 3.0}) h->add_output_std(v);
  for (double v : {0.1, 0.2, std::nan("")}) h->add_grad_norm(v);
  for (bool v : {false, true, false}) h->add_non_finite(v);
  history.Add()->set_full_name("act");
  const StepHistory got = StepHistoryFromProto(history);
  ASSERT_EQ(got.layers.size(), 2u);
  const LayerSteps* fc = got.Find("blocks.0.fc");
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->steps, (std::vector<uint64_t>{3, 5, 6}));
  EXPECT_EQ(fc->latency_ms[0], 0.5);
  EXPECT_TRUE(std::isnan(fc->latency_ms[1]));
  EXPECT_EQ(fc->output_std, (std::vector<double>{1.0, 2.0, 3.0}));
  EXPECT_TRUE(std::isnan(fc->grad_norm[2]));
  EXPECT_EQ(fc->non_finite, (std::vector<bool>{false, true, false}));
  EXPECT_TRUE(got.Find("act")->steps.empty());
  EXPECT_EQ(got.Find("nope"), nullptr);
}

}  // namespace
}  // namespace tracetorch
