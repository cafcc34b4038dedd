#include "view/filter.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trace/record.h"

namespace tracetorch::view {
namespace {

using ::testing::ElementsAre;

LayerTrace Layer(std::string full_name, std::string type, std::optional<double> mean_ms) {
  LayerTrace layer;
  layer.full_name = std::move(full_name);
  layer.name = layer.full_name;
  layer.type = std::move(type);
  layer.latency_ms_mean = mean_ms;
  layer.latency_ms = mean_ms;
  return layer;
}

TraceRecord Record() {
  TraceRecord record;
  record.metadata.model_name = "TrainNet";
  record.layers = {
      Layer("stem", "Linear", 0.035),      Layer("blocks.0.fc", "Linear", 0.034),
      Layer("blocks.0", "Block", 0.531),   Layer("blocks.1.fc", "Linear", 0.035),
      Layer("blocks", "Sequential", 1.45), Layer("head", "Linear", std::nullopt),
  };
  record.warnings = {
      Anomaly{AnomalyType::kHighVariance, AnomalySeverity::kInfo, "blocks.0.fc", "hi", {}},
      Anomaly{AnomalyType::kDeadLayer, AnomalySeverity::kWarning, "head", "dead", {}},
      Anomaly{AnomalyType::kNanActivation, AnomalySeverity::kCritical, "<input>", "nan", {}},
  };
  return record;
}

std::vector<std::string> Names(const TraceRecord& record) {
  std::vector<std::string> names;
  for (const LayerTrace& layer : record.layers) names.push_back(layer.full_name);
  return names;
}

std::vector<std::string> AnomalyLayers(const TraceRecord& record) {
  std::vector<std::string> names;
  for (const Anomaly& anomaly : record.warnings) names.push_back(anomaly.layer);
  return names;
}

TEST(LayerFilter, EmptyFilterKeepsEverythingIncludingInputAnomalies) {
  const LayerFilter filter;
  EXPECT_TRUE(filter.empty());
  const TraceRecord record = Record();
  EXPECT_EQ(ApplyFilter(record, filter), record);
}

TEST(LayerFilter, GlobMatchesAcrossDots) {
  const TraceRecord shown = ApplyFilter(Record(), LayerFilter{.name_glob = "blocks.*"});
  EXPECT_THAT(Names(shown), ElementsAre("blocks.0.fc", "blocks.0", "blocks.1.fc"));
}

TEST(LayerFilter, GlobAndTypeCombine) {
  const TraceRecord shown =
      ApplyFilter(Record(), LayerFilter{.name_glob = "blocks.*", .type = "Linear"});
  EXPECT_THAT(Names(shown), ElementsAre("blocks.0.fc", "blocks.1.fc"));
  EXPECT_THAT(AnomalyLayers(shown), ElementsAre("blocks.0.fc"));
  EXPECT_EQ(shown.metadata.model_name, "TrainNet");
}

TEST(LayerFilter, TypeIsExact) {
  EXPECT_TRUE(ApplyFilter(Record(), LayerFilter{.type = "linear"}).layers.empty());
  EXPECT_THAT(Names(ApplyFilter(Record(), LayerFilter{.type = "Block"})), ElementsAre("blocks.0"));
}

TEST(LayerFilter, MinLatencyIsInclusiveAndSkipsUnknownLatency) {
  EXPECT_THAT(Names(ApplyFilter(Record(), LayerFilter{.min_latency_ms = 0.5})),
              ElementsAre("blocks.0", "blocks"));
  EXPECT_THAT(Names(ApplyFilter(Record(), LayerFilter{.min_latency_ms = 0.531})),
              ElementsAre("blocks.0", "blocks"));
  // head has no latency: never matches, even a threshold of 0.
  EXPECT_THAT(Names(ApplyFilter(Record(), LayerFilter{.min_latency_ms = 0.0})),
              ElementsAre("stem", "blocks.0.fc", "blocks.0", "blocks.1.fc", "blocks"));
}

TEST(LayerFilter, MinLatencyFallsBackToLatestLatency) {
  LayerTrace layer = Layer("x", "Linear", std::nullopt);
  layer.latency_ms = 2.0;
  EXPECT_TRUE((LayerFilter{.min_latency_ms = 1.0}).Matches(layer));
  EXPECT_FALSE((LayerFilter{.min_latency_ms = 3.0}).Matches(layer));
}

TEST(LayerFilter, AnomaliesOfFilteredOutLayersAreDropped) {
  const TraceRecord shown = ApplyFilter(Record(), LayerFilter{.name_glob = "stem"});
  EXPECT_THAT(Names(shown), ElementsAre("stem"));
  EXPECT_TRUE(shown.warnings.empty());
}

TEST(LayerFilter, GlobWithBracketsAndQuestionMark) {
  EXPECT_THAT(Names(ApplyFilter(Record(), LayerFilter{.name_glob = "blocks.[01].fc"})),
              ElementsAre("blocks.0.fc", "blocks.1.fc"));
  EXPECT_THAT(Names(ApplyFilter(Record(), LayerFilter{.name_glob = "hea?"})), ElementsAre("head"));
}

TEST(LayerFilter, ValidateRejectsNegativeAndNonFinite) {
  EXPECT_TRUE((LayerFilter{.min_latency_ms = 0.0}).Validate().ok());
  EXPECT_EQ((LayerFilter{.min_latency_ms = -1.0}).Validate().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      (LayerFilter{.min_latency_ms = std::numeric_limits<double>::quiet_NaN()}).Validate().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      (LayerFilter{.min_latency_ms = std::numeric_limits<double>::infinity()}).Validate().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::view
