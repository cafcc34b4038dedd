#include "trace/forward_passes.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/status/statusor.h"
#include "trace/json.h"

namespace tracetorch {
namespace {

LayerTrace Layer(const std::string& full_name, int32_t depth, int64_t forward_count) {
  LayerTrace l;
  l.name = full_name;
  l.full_name = full_name;
  l.depth = depth;
  l.forward_count = forward_count;
  return l;
}

TEST(ForwardPasses, AreTheRootCallsTheRecordCarries) {
  TraceRecord r;
  // resnet18 over 3 steps: each block's ReLU runs twice a step, the stem once.
  r.layers = {Layer("conv1", 1, 3), Layer("layer1.0.relu", 3, 6)};
  SetForwardPasses(3, &r);
  EXPECT_EQ(ForwardPasses(r), 3);
  SetForwardPasses(4, &r);  // Replaced, not appended.
  EXPECT_EQ(ForwardPasses(r), 4);
  EXPECT_EQ(r.metadata.extra.size(), 1u);
}

TEST(ForwardPasses, WithoutThemAreTheCallsOfTheTopLevelLayers) {
  TraceRecord r;
  EXPECT_EQ(ForwardPasses(r), 0);
  r.layers = {Layer("layer1.0.relu", 3, 6), Layer("conv1", 1, 3), Layer("fc", 1, 2)};
  EXPECT_EQ(ForwardPasses(r), 3);  // Not 6: the nested ReLU runs twice per pass.
  r.metadata.SetExtra(kForwardPassesKey, "\"many\"");  // Not a count: ignored.
  EXPECT_EQ(ForwardPasses(r), 3);
}

TEST(ForwardPasses, SurviveTheJsonFile) {
  TraceRecord r;
  r.metadata.model_name = "m";
  r.layers = {Layer("fc", 1, 8)};
  SetForwardPasses(2, &r);
  absl::StatusOr<TraceRecord> back = ParseTraceJson(TraceToJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ForwardPasses(*back), 2);
}

TEST(ForwardPasses, OfATracetorchMlFileAreItsLayersCalls) {
  absl::StatusOr<TraceRecord> r =
      ReadTraceFile(std::string(TRACETORCH_FIXTURES_DIR) + "/upstream/train_trace.json");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(ForwardPasses(*r), 20);  // What tracetorch-ml's own summary printed.
}

}  // namespace
}  // namespace tracetorch
