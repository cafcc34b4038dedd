#include "daemon/core/history.h"

#include <cmath>
#include <vector>

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

TEST(LayerHistory, CountsThinningsAndStampsChangedPoints) {
  LayerHistory h(8);
  for (uint64_t step = 0; step < 8; ++step) h.RecordForward(step, 1.0, 1.0, false, 10 + step);
  EXPECT_EQ(h.thinnings(), 0u);  // Full, not thinned yet.
  EXPECT_EQ(h.points()[3].stamp, 13u);
  h.RecordBackward(6, 2.0, false, 50);  // In place: only that point's stamp moves.
  EXPECT_EQ(h.thinnings(), 0u);
  EXPECT_EQ(h.points()[6].stamp, 50u);
  EXPECT_EQ(h.points()[7].stamp, 17u);
  h.RecordForward(8, 1.0, 1.0, false, 60);  // Full: thinned, then appended.
  EXPECT_EQ(h.thinnings(), 1u);
  EXPECT_EQ(h.points().back().stamp, 60u);
  h.RecordBackward(1, 2.0, false, 70);  // Thinned away: ignored, no stamp.
  for (const HistoryPoint& p : h.points()) EXPECT_NE(p.stamp, 70u);
  uint64_t thinnings = h.thinnings();
  for (uint64_t step = 9; step < 200; ++step) h.RecordForward(step, 1.0, 1.0, false);
  EXPECT_GT(h.thinnings(), thinnings + 10);
}

// A copy taken before a thinning, thinned as thin_boundary() says (even positions among the points
// before the boundary), equals the history's points before the point just appended.
TEST(LayerHistory, ThinBoundaryReplaysTheLatestThinningOnAnOlderCopy) {
  LayerHistory h(8, /*stagger=*/2);  // First thinning at 6 points, then every 2.
  EXPECT_EQ(h.thin_boundary(), 0u);
  int checked = 0;
  for (uint64_t step = 10; step < 100; step += 3) {
    const std::vector<HistoryPoint> before = h.points();
    const uint64_t thinnings = h.thinnings();
    h.RecordForward(step, 1.0, 1.0, false);
    if (h.thinnings() == thinnings) continue;
    ASSERT_EQ(h.thinnings(), thinnings + 1);
    const uint64_t boundary = h.thin_boundary();
    EXPECT_EQ(boundary, before[before.size() / 2].step);
    std::vector<uint64_t> replayed;
    size_t position = 0;
    for (const HistoryPoint& p : before) {
      if (p.step >= boundary || position++ % 2 == 0) replayed.push_back(p.step);
    }
    replayed.push_back(step);
    std::vector<uint64_t> got;
    for (const HistoryPoint& p : h.points()) got.push_back(p.step);
    EXPECT_EQ(got, replayed) << "step " << step;
    ++checked;
  }
  EXPECT_GT(checked, 5);
}

TEST(LayerHistory, StaggeredHistoriesInLockstepAreThinnedAtDifferentSteps) {
  constexpr size_t kCapacity = 32;
  constexpr size_t kLayers = kCapacity / 4;  // One full period of staggers.
  std::vector<LayerHistory> layers;
  for (size_t i = 0; i < kLayers; ++i) {
    layers.emplace_back(kCapacity, LayerHistory::Stagger(i, kCapacity));
  }
  EXPECT_EQ(LayerHistory::Stagger(kLayers, kCapacity), 0u);  // The next period starts over.
  std::vector<int> thinned_at_step(1000, 0);
  for (uint64_t step = 0; step < 1000; ++step) {
    for (LayerHistory& h : layers) {
      const uint64_t before = h.thinnings();
      h.RecordForward(step, 1.0, 1.0, false);
      thinned_at_step[step] += static_cast<int>(h.thinnings() - before);
      EXPECT_LE(h.points().size(), kCapacity);
    }
  }
  // After the first rounds, one layer is thinned at a time, every step.
  for (uint64_t step = 2 * kCapacity; step < 1000; ++step) {
    EXPECT_EQ(thinned_at_step[step], 1) << "step " << step;
  }
  for (const LayerHistory& h : layers) {
    EXPECT_EQ(h.points().back().step, 999u);
    EXPECT_GT(h.points().size(), kCapacity / 2);
  }
}

}  // namespace
}  // namespace tracetorch::daemon
