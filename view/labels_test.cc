#include "view/labels.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch::view {
namespace {

Anomaly On(std::string layer, AnomalySeverity severity) {
  Anomaly a;
  a.layer = std::move(layer);
  a.severity = severity;
  return a;
}

TEST(FormatUnixTime, UtcOrDash) {
  EXPECT_EQ(FormatUnixTime(0), "-");
  EXPECT_EQ(FormatUnixTime(-5), "-");
  EXPECT_EQ(FormatUnixTime(int64_t{1767225600} * 1000000000 + 999), "2026-01-01T00:00:00Z");
}

TEST(SeverityMark, PlainAndRich) {
  const Style plain = Style::Plain();
  const Style symbols{.color = false, .unicode = true};
  EXPECT_EQ(SeverityMark(std::nullopt, plain), "[ok]");
  EXPECT_EQ(SeverityMark(AnomalySeverity::kWarning, plain), "[warning]");
  EXPECT_EQ(SeverityMark(std::nullopt, symbols), "✓");
  EXPECT_EQ(SeverityMark(AnomalySeverity::kCritical, symbols), "✗");
  EXPECT_EQ(SeverityMark(AnomalySeverity::kInfo, symbols), "ℹ");
  EXPECT_EQ(SeverityMark(AnomalySeverity::kCritical, Style::Rich()), "\x1b[31m✗\x1b[0m");
  EXPECT_EQ(SeverityMark(std::nullopt, Style::Rich()), "\x1b[32m✓\x1b[0m");
}

TEST(WorstSeverityByLayer, KeepsTheWorstPerLayer) {
  const auto worst = WorstSeverityByLayer(
      {On("a", AnomalySeverity::kInfo), On("b", AnomalySeverity::kWarning),
       On("a", AnomalySeverity::kCritical), On("a", AnomalySeverity::kWarning)});
  ASSERT_EQ(worst.size(), 2u);
  EXPECT_EQ(worst.at("a"), AnomalySeverity::kCritical);
  EXPECT_EQ(worst.at("b"), AnomalySeverity::kWarning);
  EXPECT_TRUE(WorstSeverityByLayer({}).empty());
}

}  // namespace
}  // namespace tracetorch::view
