#include "agent/summary.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trace/forward_passes.h"

namespace tracetorch::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

LayerTrace Layer(std::string name, double fwd_mean, int64_t forwards) {
  LayerTrace l;
  l.name = name;
  l.full_name = name;
  l.params = 100;
  l.latency_ms = fwd_mean;
  l.latency_ms_mean = fwd_mean;
  l.latency_ms_max = fwd_mean * 2;
  l.forward_count = forwards;
  return l;
}

TEST(SessionSummary, KeepsTheLibraryLinesOfARecordFilledInByHand) {
  TraceRecord r;
  r.metadata.model_name = "m";
  r.layers.push_back(Layer("fc", 2.0, 3));
  r.layers.push_back(Layer("act", 0.5, 3));
  r.layers[0].bwd_latency_ms_mean = 0.25;
  r.layers[0].bwd_latency_ms_max = 0.5;
  r.layers[0].backward_count = 2;
  r.layers[1].fwd_mem_alloc_delta = 5 << 20;
  r.layers[1].fwd_mem_reserved_delta = 8 << 20;
  const std::string text = SessionSummary(r, /*steps=*/-1, /*hook_errors=*/0);
  EXPECT_THAT(text, testing::StartsWith("Model: m\nLayers traced: 2\nTotal parameters: 200\n"
                                        "Total time: 0.000ms\nForward passes: 3\n"));
  EXPECT_THAT(text, HasSubstr("\nSlowest layer: fc (2.00ms mean / 4.00ms max over 3 fwd)\n"));
  EXPECT_THAT(text, HasSubstr("\nSlowest backward: fc (0.250ms mean / 0.500ms max over 2 bwd)\n"));
  EXPECT_THAT(text, HasSubstr("\nHeaviest fwd mem: act (+5.00MiB alloc, +8.00MiB reserved)\n"));
  EXPECT_THAT(text, Not(HasSubstr("Heaviest bwd mem")));
  EXPECT_THAT(text, testing::EndsWith("Anomalies detected: 0\n"));
}

TEST(SessionSummary, LiveSessionCountsStepsAndListsAnomalies) {
  TraceRecord r;
  r.layers.push_back(Layer("fc", 1.0, 7));  // Called twice in some steps: 7 calls, 5 steps.
  SetForwardPasses(5, &r);                  // As the Tracer's records carry them.
  r.metadata.nan_origin = NanOrigin{.layer = "fc", .step = 4};
  Anomaly a;
  a.severity = AnomalySeverity::kCritical;
  a.layer = "fc";
  a.message = "NaN detected in output";
  r.warnings.push_back(a);
  const std::string text = SessionSummary(r, /*steps=*/5, /*hook_errors=*/2);
  EXPECT_THAT(text, HasSubstr("Model: <unnamed>\n"));
  EXPECT_THAT(text, HasSubstr("Total time: running\nForward passes: 5\n"));
  EXPECT_THAT(text, Not(HasSubstr("Slowest backward")));
  EXPECT_THAT(text, HasSubstr("NaN origin: fc (step 4)\nHook errors: 2\n"));
  EXPECT_THAT(text,
              HasSubstr("Anomalies detected: 1\n  ✗ [critical] fc: NaN detected in output\n"));
}

}  // namespace
}  // namespace tracetorch::agent
