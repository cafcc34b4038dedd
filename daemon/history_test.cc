#include "daemon/history.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tracetorch::daemon {
namespace {

TEST(LayerHistory, ForwardAndBackwardShareAStep) {
  LayerHistory h(8);
  h.RecordForward(0, 1.5, 0.25, false);
  h.RecordBackward(0, 3.0, false);
  h.RecordForward(1, std::nullopt, std::nullopt, true);
  ASSERT_EQ(h.points().size(), 2u);
  EXPECT_EQ(h.points()[0].latency_ms, 1.5);
  EXPECT_EQ(h.points()[0].output_std, 0.25);
  EXPECT_EQ(h.points()[0].grad_norm, 3.0);
  EXPECT_FALSE(h.points()[0].non_finite);
  EXPECT_TRUE(std::isnan(h.points()[1].latency_ms));
  EXPECT_TRUE(h.points()[1].non_finite);
}

TEST(LayerHistory, StaysBoundedAndKeepsRecentStepsDense) {
  LayerHistory h(16);
  for (uint64_t step = 0; step < 10000; ++step) h.RecordForward(step, 1.0, 1.0, false);
  const auto& p = h.points();
  EXPECT_LE(p.size(), 16u);
  EXPECT_EQ(p.back().step, 9999u);
  // The newest quarter is at full resolution; older points are sparser but ordered.
  for (size_t i = p.size() - 4; i + 1 < p.size(); ++i) EXPECT_EQ(p[i + 1].step, p[i].step + 1);
  for (size_t i = 0; i + 1 < p.size(); ++i) EXPECT_LT(p[i].step, p[i + 1].step);
  EXPECT_LT(p.front().step, 9000u);
}

TEST(LayerHistory, IgnoresStepsOlderThanTheWindow) {
  LayerHistory h(8);
  for (uint64_t step = 100; step < 120; ++step) h.RecordForward(step, 1.0, 1.0, false);
  const size_t before = h.points().size();
  h.RecordBackward(3, 5.0, true);
  EXPECT_EQ(h.points().size(), before);
}

}  // namespace
}  // namespace tracetorch::daemon
