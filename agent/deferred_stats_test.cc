#include "agent/deferred_stats.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "agent/stats.h"

namespace tracetorch::agent {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

void ExpectNear(const std::optional<double>& got, const std::optional<double>& want,
                const char* what, double relative) {
  ASSERT_EQ(got.has_value(), want.has_value()) << what;
  if (!want) return;
  if (std::isnan(*want)) {
    EXPECT_TRUE(std::isnan(*got)) << what;
    return;
  }
  if (std::isinf(*want)) {
    EXPECT_EQ(*got, *want) << what;
    return;
  }
  EXPECT_NEAR(*got, *want, relative * std::max(1.0, std::abs(*want))) << what;
}

// The ATen path on the CPU (what deferred_cpu runs, and what a CUDA tensor runs) against the
// fused CPU kernel.
void ExpectSameAsKernel(const at::Tensor& t, StatsMode mode = StatsMode::kFull) {
  SCOPED_TRACE(::testing::Message() << "dtype=" << DtypeName(t.scalar_type())
                                    << " sizes=" << t.sizes() << " strides=" << t.strides());
  absl::StatusOr<std::shared_ptr<DeferredStats>> d = DeferredStats::LaunchTensor(t, mode);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE((*d)->Done());  // On the CPU the values are there at once.
  const TensorStats got = (*d)->Tensor();
  const absl::StatusOr<TensorStats> want = ComputeTensorStats(t, mode);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(got.nan_count, want->nan_count);
  EXPECT_EQ(got.inf_count, want->inf_count);
  EXPECT_EQ(got.neg_inf_count, want->neg_inf_count);
  EXPECT_EQ(got.finite_all_zero, want->finite_all_zero);
  const double relative = t.scalar_type() == at::kDouble ? 1e-9 : 1e-5;
  ExpectNear(got.mean, want->mean, "mean", relative);
  ExpectNear(got.std, want->std, "std", relative);
  ExpectNear(got.min, want->min, "min", 1e-9);  // Exact: an element.
  ExpectNear(got.max, want->max, "max", 1e-9);
}

void ExpectSameGradAsKernel(const at::Tensor& g) {
  SCOPED_TRACE(::testing::Message() << "dtype=" << DtypeName(g.scalar_type())
                                    << " sizes=" << g.sizes() << " strides=" << g.strides());
  absl::StatusOr<std::shared_ptr<DeferredStats>> d = DeferredStats::LaunchGrad(g);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE((*d)->Done());
  const GradStats got = (*d)->Grad();
  const absl::StatusOr<GradStats> want = ComputeGradStats(g);
  ASSERT_TRUE(want.ok()) << want.status();
  const double relative = g.scalar_type() == at::kDouble ? 1e-9 : 1e-5;
  ExpectNear(got.norm, want->norm, "norm", relative);
  ExpectNear(got.mean, want->mean, "mean", relative);
  EXPECT_EQ(got.has_nan, want->has_nan);
  EXPECT_EQ(got.all_zero, want->all_zero);
}

std::vector<at::ScalarType> FloatTypes() {
  return {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16};
}

TEST(DeferredStatsTest, MatchesTheKernelOnEveryFloatDtype) {
  at::manual_seed(11);
  for (at::ScalarType type : FloatTypes()) {
    ExpectSameAsKernel(at::randn({64, 33}).to(type));
    ExpectSameAsKernel((at::randn({1000}) * 0.01 + 50).to(type));  // |mean| >> std.
    ExpectSameAsKernel(at::full({7}, 3.0).to(type));
  }
}

TEST(DeferredStatsTest, MatchesTheKernelWithNanAndInf) {
  at::manual_seed(12);
  for (at::ScalarType type : FloatTypes()) {
    at::Tensor x = at::randn({5, 40});
    x[1][3] = kNan;
    x[2][7] = kInf;
    x[4][0] = -kInf;
    ExpectSameAsKernel(x.to(type));
    ExpectSameAsKernel(x.to(type), StatsMode::kNonFiniteOnly);
    ExpectSameAsKernel(at::full({9}, kNan).to(type));  // No finite element: null moments.
    ExpectSameAsKernel(at::randn({9}).to(type), StatsMode::kNonFiniteOnly);
    // A causal mask (0 / -inf): the facts that tell a mask.
    const at::Tensor mask = at::triu(at::full({6, 6}, -kInf), 1).to(type);
    ExpectSameAsKernel(mask);
    ExpectSameAsKernel(mask, StatsMode::kNonFiniteOnly);
  }
}

TEST(DeferredStatsTest, MatchesTheKernelOnStridedTensors) {
  at::manual_seed(13);
  for (at::ScalarType type : FloatTypes()) {
    const at::Tensor base = at::randn({16, 24}).to(type);
    ExpectSameAsKernel(base.t());
    ExpectSameAsKernel(base.slice(1, 1, 24, 3));
    ExpectSameAsKernel(at::randn({1, 24}).to(type).expand({8, 24}));
  }
}

TEST(DeferredStatsTest, WhatIsNotReducedGivesNullStatistics) {
  for (const at::Tensor& t : {at::arange(10), at::zeros({0}), at::ones({3}, at::kBool)}) {
    absl::StatusOr<std::shared_ptr<DeferredStats>> d =
        DeferredStats::LaunchTensor(t, StatsMode::kFull);
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_TRUE((*d)->Done());
    EXPECT_EQ((*d)->Tensor(), TensorStats{});
  }
  EXPECT_EQ(DeferredStats::LaunchTensor(at::Tensor(), StatsMode::kFull).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeferredStats::LaunchGrad(at::Tensor()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DeferredStatsTest, GradientsMatchTheKernel) {
  at::manual_seed(14);
  for (at::ScalarType type : FloatTypes()) {
    ExpectSameGradAsKernel(at::randn({32, 17}).to(type));
    ExpectSameGradAsKernel(at::randn({8, 12}).to(type).t());
    ExpectSameGradAsKernel(at::zeros({6}).to(type));
    at::Tensor g = at::randn({20});
    g[5] = kNan;
    ExpectSameGradAsKernel(g.to(type));
    g[5] = kInf;
    ExpectSameGradAsKernel(g.to(type));
  }
}

}  // namespace
}  // namespace tracetorch::agent
