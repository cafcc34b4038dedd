#include "agent/ops/finite_scan.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace tracetorch::ops {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(FiniteScanTest, KernelFindsANonFiniteValueAtEveryPosition) {
  // Lengths around the 32-float (16-double) step and its tail, the bad value at every index.
  for (int64_t n : {1, 7, 31, 32, 33, 64, 100}) {
    std::vector<float> f(n, 1.5f);
    std::vector<double> d(n, -2.5);
    EXPECT_TRUE(AllFinite(f.data(), n)) << n;
    EXPECT_TRUE(AllFinite(d.data(), n)) << n;
    for (int64_t i = 0; i < n; ++i) {
      for (float bad : {kNan, kInf, -kInf}) {
        f[i] = bad;
        d[i] = bad;
        EXPECT_FALSE(AllFinite(f.data(), n)) << n << " " << i << " " << bad;
        EXPECT_FALSE(AllFinite(d.data(), n)) << n << " " << i << " " << bad;
        f[i] = 1.5f;
        d[i] = -2.5;
      }
    }
  }
  // The largest finite values stay finite (x - x is 0, no overflow).
  std::vector<float> big(40, std::numeric_limits<float>::max());
  big[3] = -std::numeric_limits<float>::max();
  EXPECT_TRUE(AllFinite(big.data(), 40));
  EXPECT_TRUE(AllFinite(big.data(), 0));
}

TEST(FiniteScanTest, CountsMatchTheStatisticsKernelForEveryLayout) {
  at::Tensor x = at::randn({4, 8, 6, 5});
  EXPECT_EQ(CountNonFinite(x), NonFiniteCounts{});
  x[1][2][3][4] = kNan;
  x[0][0][0][0] = kNan;
  x[3][7][5][4] = -kInf;
  const NonFiniteCounts want{2, 1, 1};  // One of the Infs is -inf.
  EXPECT_EQ(CountNonFinite(x), want);
  EXPECT_EQ(CountNonFinite(x.to(at::kDouble)), want);
  // Dense but not contiguous: channels-last and a transposed matrix take the fast scan.
  EXPECT_EQ(CountNonFinite(x.contiguous(at::MemoryFormat::ChannelsLast)), want);
  EXPECT_EQ(CountNonFinite(x.reshape({32, 30}).t()), want);
  // Not dense: a strided view (the NaNs at even positions of the last dim only).
  EXPECT_EQ(CountNonFinite(x.slice(/*dim=*/3, 0, 5, 2)), want);
  EXPECT_EQ(CountNonFinite(x.slice(/*dim=*/3, 1, 5, 2)), NonFiniteCounts{});
  // Other dtypes go to the statistics kernel: half counts, integers have none.
  EXPECT_EQ(CountNonFinite(x.to(at::kHalf)), want);
  EXPECT_EQ(CountNonFinite(at::ones({3}, at::kLong)), NonFiniteCounts{});
  EXPECT_EQ(CountNonFinite(at::empty({0})), NonFiniteCounts{});
  EXPECT_EQ(CountNonFinite(at::Tensor()), std::nullopt);
}

TEST(FiniteScanTest, LargeTensorsSplitAcrossThreadsFindTheLastElement) {
  at::Tensor x = at::zeros({(1 << 18) + 3});
  EXPECT_EQ(CountNonFinite(x), NonFiniteCounts{});
  x[x.numel() - 1] = kInf;
  // Every finite value is 0 (a mask's pattern): finite_all_zero.
  EXPECT_EQ(CountNonFinite(x), (NonFiniteCounts{0, 1, 0, true}));
  x[1 << 17] = kNan;
  EXPECT_EQ(CountNonFinite(x), (NonFiniteCounts{1, 1, 0, true}));
}

}  // namespace
}  // namespace tracetorch::ops
