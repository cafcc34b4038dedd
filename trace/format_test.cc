#include "trace/format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "trace/json.h"
#include "trace/record.h"

namespace tracetorch {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(FormatCount, MatchesUpstream) {
  EXPECT_EQ(FormatCount(0), "0");
  EXPECT_EQ(FormatCount(128), "128");
  EXPECT_EQ(FormatCount(650), "650");
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(1000), "1.0K");
  EXPECT_EQ(FormatCount(2112), "2.1K");
  EXPECT_EQ(FormatCount(11210), "11.2K");
  EXPECT_EQ(FormatCount(768000), "768.0K");
  EXPECT_EQ(FormatCount(1771776), "1.8M");
  EXPECT_EQ(FormatCount(2547466), "2.5M");
  EXPECT_EQ(FormatCount(3000000000), "3.0B");
  EXPECT_EQ(FormatCount(-2112), "-2.1K");
}

TEST(FormatMs, MatchesUpstream) {
  EXPECT_EQ(FormatMs(0.0346), "0.035ms");
  EXPECT_EQ(FormatMs(0.0), "0.000ms");
  EXPECT_EQ(FormatMs(0.5314351999970769), "0.531ms");
  EXPECT_EQ(FormatMs(4.081), "4.08ms");
  EXPECT_EQ(FormatMs(1.4481470500015803), "1.45ms");
  EXPECT_EQ(FormatMs(10.48), "10.5ms");
  EXPECT_EQ(FormatMs(81.7), "81.7ms");
  EXPECT_EQ(FormatMs(152.4), "152ms");
  EXPECT_EQ(FormatMs(10545.3), "10545ms");
  EXPECT_EQ(FormatMs(kNaN), "n/a");
  EXPECT_EQ(FormatMs(kInf), "n/a");
}

TEST(FormatShape, Brackets) {
  EXPECT_EQ(FormatShape({16, 64}), "[16, 64]");
  EXPECT_EQ(FormatShape({8, 512, 768}), "[8, 512, 768]");
  EXPECT_EQ(FormatShape({7}), "[7]");
  EXPECT_EQ(FormatShape({}), "[]");
}

TEST(FormatBytes, BinaryUnits) {
  EXPECT_EQ(FormatBytes(0), "0B");
  EXPECT_EQ(FormatBytes(512), "512B");
  EXPECT_EQ(FormatBytes(-512), "-512B");
  EXPECT_EQ(FormatBytes(1023), "1023B");
  EXPECT_EQ(FormatBytes(2048), "2.0KiB");
  EXPECT_EQ(FormatBytes(-1572864), "-1.50MiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 30), "3.00GiB");
  EXPECT_EQ(FormatBytes(std::numeric_limits<int64_t>::min()), "-8.00EiB");
}

TEST(FormatPercent, Signed) {
  EXPECT_EQ(FormatPercent(0.3444816771821641), "+34.4%");
  EXPECT_EQ(FormatPercent(-0.772), "-77.2%");
  EXPECT_EQ(FormatPercent(12.25458333955819), "+1225.5%");
  EXPECT_EQ(FormatPercent(0.0), "+0.0%");
  EXPECT_EQ(FormatPercent(kInf), "+inf%");
  EXPECT_EQ(FormatPercent(kNaN), "nan%");
}

TEST(FormatFixed, DecimalsAndNonFinite) {
  EXPECT_EQ(FormatFixed(0.5656893849372864, 4), "0.5657");
  EXPECT_EQ(FormatFixed(26.52947425842285, 2), "26.53");
  EXPECT_EQ(FormatFixed(2.5, 0), "2");  // Round half to even, like Python's format().
  EXPECT_EQ(FormatFixed(kNaN, 2), "nan");
  EXPECT_EQ(FormatFixed(-kNaN, 2), "nan");
  EXPECT_EQ(FormatFixed(kInf, 2), "inf");
  EXPECT_EQ(FormatFixed(-kInf, 2), "-inf");
}

// The numbers the Python library's CLI printed for its own traces (cli_outputs.txt).
TEST(Format, MatchesUpstreamCliOnUpstreamTraces) {
  const std::string dir = std::string(TRACETORCH_FIXTURES_DIR) + "/upstream/";
  absl::StatusOr<TraceRecord> train = ReadTraceFile(dir + "train_trace.json");
  ASSERT_TRUE(train.ok()) << train.status();
  int64_t params = 0;
  for (const LayerTrace& l : train->layers) params += l.params;
  EXPECT_EQ(FormatCount(params), "11.2K");
  EXPECT_EQ(FormatMs(*train->metadata.total_time_ms), "81.7ms");
  const auto layer = [&](const char* name) { return *train->FindLayer(name); };
  EXPECT_EQ(FormatCount(layer("stem").params), "2.1K");
  EXPECT_EQ(FormatCount(layer("norm").params), "128");
  EXPECT_EQ(FormatCount(layer("head").params), "650");
  EXPECT_EQ(FormatMs(*layer("stem").latency_ms_mean), "0.035ms");
  EXPECT_EQ(FormatMs(*layer("stem").latency_ms_min), "0.019ms");
  EXPECT_EQ(FormatMs(*layer("stem").latency_ms_max), "0.238ms");
  EXPECT_EQ(FormatMs(*layer("blocks.0").latency_ms_mean), "0.531ms");
  EXPECT_EQ(FormatMs(*layer("blocks.0.act").latency_ms_max), "4.08ms");
  EXPECT_EQ(FormatMs(*layer("blocks").latency_ms_mean), "1.45ms");
  EXPECT_EQ(FormatShape(layer("head").outputs[0].shape), "[16, 10]");

  absl::StatusOr<TraceRecord> example = ReadTraceFile(dir + "example_trace.json");
  ASSERT_TRUE(example.ok()) << example.status();
  params = 0;
  for (const LayerTrace& l : example->layers) params += l.params;
  EXPECT_EQ(FormatCount(params), "2.5M");
  EXPECT_EQ(FormatMs(*example->metadata.total_time_ms), "10768ms");
  EXPECT_EQ(FormatCount(example->layers[0].params), "768.0K");
  EXPECT_EQ(FormatCount(example->layers[1].params), "1.8M");
  EXPECT_EQ(FormatCount(example->layers[2].params), "7.7K");
  EXPECT_EQ(FormatMs(*example->layers[0].latency_ms), "10.5ms");
  EXPECT_EQ(FormatMs(*example->layers[1].latency_ms), "10545ms");
  EXPECT_EQ(FormatMs(*example->layers[2].latency_ms), "0.182ms");
  EXPECT_EQ(FormatShape(example->layers[1].outputs[1].shape), "[8, 512, 512]");
}

}  // namespace
}  // namespace tracetorch
