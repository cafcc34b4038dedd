#include "client/record_proto.h"

#include <cmath>

#include "gtest/gtest.h"

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

TEST(RecordProto, SurvivesSerialization) {
  const TraceRecord r = Sample();
  v1::TraceRecord p;
  ToProto(r, &p);
  v1::TraceRecord parsed;
  ASSERT_TRUE(parsed.ParseFromString(p.SerializeAsString()));
  EXPECT_EQ(FromProto(parsed), r);
}

}  // namespace
}  // namespace tracetorch
