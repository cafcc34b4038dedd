#include "agent/stats.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

namespace tracetorch::agent {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Reference statistics computed with plain ATen operators in double precision.
TensorStats Reference(const at::Tensor& t) {
  TensorStats s;
  const at::Tensor x = t.to(at::kDouble).reshape({-1});
  s.nan_count = at::isnan(x).sum().item<int64_t>();
  s.inf_count = at::isinf(x).sum().item<int64_t>();
  const at::Tensor f = x.masked_select(at::isfinite(x));
  if (f.numel() > 0) {
    s.mean = f.mean().item<double>();
    s.std = f.std(/*unbiased=*/false).item<double>();
    s.min = f.min().item<double>();
    s.max = f.max().item<double>();
  }
  return s;
}

// float64 tensors are reduced in double throughout; narrower ones with float partial sums within
// blocks (stats.h), as accurate as ATen's float32 reductions.
void ExpectNear(const std::optional<double>& got, const std::optional<double>& want,
                const char* what, double relative) {
  ASSERT_EQ(got.has_value(), want.has_value()) << what;
  if (!want) return;
  const double tol = relative * std::max(1.0, std::abs(*want));
  EXPECT_NEAR(*got, *want, tol) << what;
}

void ExpectMatchesReference(const at::Tensor& t) {
  SCOPED_TRACE(::testing::Message() << "dtype=" << DtypeName(t.scalar_type())
                                    << " sizes=" << t.sizes() << " strides=" << t.strides());
  const absl::StatusOr<TensorStats> got = ComputeTensorStats(t, StatsMode::kFull);
  ASSERT_TRUE(got.ok()) << got.status();
  const TensorStats want = Reference(t);
  EXPECT_EQ(got->nan_count, want.nan_count);
  EXPECT_EQ(got->inf_count, want.inf_count);
  const double relative = t.scalar_type() == at::kDouble ? 1e-9 : 1e-6;
  ExpectNear(got->mean, want.mean, "mean", relative);
  ExpectNear(got->std, want.std, "std", relative);
  ExpectNear(got->min, want.min, "min", 1e-9);  // Exact: an element.
  ExpectNear(got->max, want.max, "max", 1e-9);
}

class StatsTest : public ::testing::Test {
 protected:
  void SetUp() override { at::manual_seed(1234); }
};

TEST_F(StatsTest, RandomFloat32OfManySizes) {
  // Sizes around the 8-wide unrolled loop, the 1024 chunk and the parallel grain.
  for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 1023, 1024, 1025, 8192, 200003}) {
    ExpectMatchesReference(at::randn({n}) * 3 + 0.5);
  }
}

TEST_F(StatsTest, ZeroDimTensor) { ExpectMatchesReference(at::scalar_tensor(2.5)); }

TEST_F(StatsTest, OtherFloatDtypes) {
  const at::Tensor base = at::randn({37, 53});
  for (auto dtype : {at::kDouble, at::kHalf, at::kBFloat16}) {
    ExpectMatchesReference(base.to(dtype));
  }
  ExpectMatchesReference(at::randn({300000}, at::kDouble));  // Parallel double path.
}

TEST_F(StatsTest, StridedAndNonContiguous) {
  const at::Tensor a = at::randn({64, 48, 5});
  ExpectMatchesReference(a.transpose(0, 2));
  ExpectMatchesReference(a.permute({1, 2, 0}));
  ExpectMatchesReference(a.slice(/*dim=*/1, /*start=*/3, /*end=*/40, /*step=*/3));
  ExpectMatchesReference(a.select(2, 4));
  ExpectMatchesReference(a.narrow(0, 10, 20));
  ExpectMatchesReference(at::randn({1, 7}).expand({9, 7}));  // A stride-0 dim.
  ExpectMatchesReference(a.to(at::kHalf).transpose(0, 1));
  ExpectMatchesReference(a.to(at::kDouble).slice(0, 0, 64, 2));
  ExpectMatchesReference(a.to(at::kBFloat16).select(1, 7));
}

TEST_F(StatsTest, NanAndInfAreCountedAndExcluded) {
  at::Tensor t = at::randn({1000});
  auto acc = t.accessor<float, 1>();
  acc[0] = static_cast<float>(kNan);  // The first element is the kernel's shift candidate.
  acc[10] = static_cast<float>(kInf);
  acc[11] = static_cast<float>(-kInf);
  acc[500] = static_cast<float>(kNan);
  acc[999] = static_cast<float>(kNan);
  ExpectMatchesReference(t);
  const TensorStats s = *ComputeTensorStats(t, StatsMode::kFull);
  EXPECT_EQ(s.nan_count, 3);
  EXPECT_EQ(s.inf_count, 2);
  ExpectMatchesReference(t.to(at::kHalf));
  ExpectMatchesReference(t.to(at::kDouble).reshape({10, 100}).t());

  at::Tensor big = at::randn({250000});
  big[123456] = kNan;  // Non-finite value in a parallel chunk.
  ExpectMatchesReference(big);
}

TEST_F(StatsTest, AllNonFiniteHasNullMomentsButCounts) {
  const at::Tensor t = at::tensor({kNan, kInf, -kInf, kNan});
  const TensorStats s = *ComputeTensorStats(t, StatsMode::kFull);
  EXPECT_EQ(s.nan_count, 2);
  EXPECT_EQ(s.inf_count, 2);
  EXPECT_FALSE(s.mean.has_value());
  EXPECT_FALSE(s.std.has_value());
  EXPECT_FALSE(s.min.has_value());
  EXPECT_FALSE(s.max.has_value());
}

TEST_F(StatsTest, EmptyIntegerAndBoolGiveNullStats) {
  EXPECT_EQ(*ComputeTensorStats(at::empty({0, 4}), StatsMode::kFull), TensorStats{});
  EXPECT_EQ(*ComputeTensorStats(at::arange(10), StatsMode::kFull), TensorStats{});
  EXPECT_EQ(*ComputeTensorStats(at::ones({3}, at::kBool), StatsMode::kFull), TensorStats{});
  EXPECT_EQ(*ComputeTensorStats(at::ones({3}, at::kComplexFloat), StatsMode::kFull), TensorStats{});
}

TEST_F(StatsTest, UndefinedTensorIsInvalidArgument) {
  EXPECT_EQ(ComputeTensorStats(at::Tensor(), StatsMode::kFull).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeGradStats(at::Tensor()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StatsTest, LargeMeanSmallSpreadKeepsPrecision) {
  // sum-of-squares without a shift loses every digit of std here.
  const at::Tensor t = at::randn({4096}, at::kDouble) * 1e-3 + 1e6;
  const TensorStats s = *ComputeTensorStats(t, StatsMode::kFull);
  const double want = t.std(/*unbiased=*/false).item<double>();
  EXPECT_NEAR(*s.std, want, want * 1e-6);
}

TEST_F(StatsTest, NonFiniteOnlyModeCountsWithoutMoments) {
  const at::Tensor clean = at::randn({5000});
  EXPECT_EQ(*ComputeTensorStats(clean, StatsMode::kNonFiniteOnly), TensorStats{});

  at::Tensor dirty = at::randn({5000});
  dirty[17] = kNan;
  dirty[4999] = -kInf;
  const TensorStats s = *ComputeTensorStats(dirty, StatsMode::kNonFiniteOnly);
  EXPECT_EQ(s.nan_count, 1);
  EXPECT_EQ(s.inf_count, 1);
  EXPECT_FALSE(s.mean.has_value());
  EXPECT_FALSE(s.std.has_value());

  at::Tensor big = at::randn({300000});
  big[299999] = kInf;
  EXPECT_EQ(ComputeTensorStats(big, StatsMode::kNonFiniteOnly)->inf_count, 1);
  EXPECT_EQ(
      ComputeTensorStats(big.to(at::kBFloat16).slice(0, 1, 300000, 2), StatsMode::kNonFiniteOnly)
          ->inf_count,
      1);
}

TEST_F(StatsTest, MaskFactsAreMeasuredForNonFiniteTensors) {
  // nn.Transformer.generate_square_subsequent_mask: 0 on and below the diagonal, -inf above.
  const at::Tensor mask = at::triu(at::full({8, 8}, -kInf), 1);
  for (StatsMode mode : {StatsMode::kFull, StatsMode::kNonFiniteOnly}) {
    for (at::ScalarType type : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf}) {
      const TensorStats m = *ComputeTensorStats(mask.to(type), mode);
      EXPECT_EQ(m.inf_count, 28);
      EXPECT_EQ(m.neg_inf_count, 28);
      EXPECT_TRUE(m.finite_all_zero);
      EXPECT_EQ(*ComputeTensorStatsWithAten(mask.to(type), mode), m);
      // Masked scores: the same -inf beside non-zero scores.
      const at::Tensor scores = (at::randn({8, 8}) + 5).to(type) + mask.to(type);
      const TensorStats s = *ComputeTensorStats(scores, mode);
      EXPECT_EQ(s.neg_inf_count, 28);
      EXPECT_FALSE(s.finite_all_zero);
      // An overflow: +Inf and -Inf.
      at::Tensor over = at::randn({8, 8}).to(type);
      over[0][0] = kInf;
      over[1][1] = -kInf;
      const TensorStats o = *ComputeTensorStats(over, mode);
      EXPECT_EQ(o.inf_count, 2);
      EXPECT_EQ(o.neg_inf_count, 1);
      const TensorStats a = *ComputeTensorStatsWithAten(over, mode);
      EXPECT_EQ(a.inf_count, 2);
      EXPECT_EQ(a.neg_inf_count, 1);
      EXPECT_FALSE(a.finite_all_zero);
    }
  }
  // A finite tensor measures none of them.
  const TensorStats zeros = *ComputeTensorStats(at::zeros({4}), StatsMode::kFull);
  EXPECT_EQ(zeros.neg_inf_count, 0);
  EXPECT_FALSE(zeros.finite_all_zero);
}

TEST_F(StatsTest, AtenPathAgreesWithKernel) {
  at::Tensor t = at::randn({33, 17}).transpose(0, 1);
  t[3][4] = kNan;
  t[5][6] = kInf;
  const TensorStats a = *ComputeTensorStats(t, StatsMode::kFull);
  const TensorStats b = *ComputeTensorStatsWithAten(t, StatsMode::kFull);
  EXPECT_EQ(a.nan_count, b.nan_count);
  EXPECT_EQ(a.inf_count, b.inf_count);
  ExpectNear(a.mean, b.mean, "mean", 1e-9);
  ExpectNear(a.std, b.std, "std", 1e-9);
  ExpectNear(a.min, b.min, "min", 1e-9);
  ExpectNear(a.max, b.max, "max", 1e-9);
  EXPECT_EQ(*ComputeTensorStatsWithAten(t, StatsMode::kNonFiniteOnly),
            *ComputeTensorStats(t, StatsMode::kNonFiniteOnly));
}

TEST_F(StatsTest, GradStatsMatchTorch) {
  for (const at::Tensor& g : {at::randn({129}), at::randn({64, 33}).t(), at::randn({300000}),
                              at::randn({50}, at::kDouble), at::randn({77}).to(at::kHalf),
                              at::randn({5000}) * 1e-8 + 3e-9}) {
    SCOPED_TRACE(g.sizes());
    const GradStats s = *ComputeGradStats(g);
    const at::Tensor d = g.to(at::kDouble);
    // float32 sums run in float lanes within blocks of 1024 (on AVX2): ATen's float32 accuracy,
    // relative to the sum of the magnitudes; float64 stays exact.
    const double tolerance = g.scalar_type() == at::kDouble ? 1e-12 : 1e-6;
    EXPECT_NEAR(*s.norm, d.norm().item<double>(), tolerance * d.norm().item<double>());
    EXPECT_NEAR(*s.mean, d.mean().item<double>(), tolerance * d.abs().mean().item<double>());
    EXPECT_FALSE(s.has_nan);
    EXPECT_FALSE(s.all_zero);
  }
}

TEST_F(StatsTest, GradStatsOfFloatGradientsAreExactWhereItMatters) {
  // A NaN or Inf in the vector body (not only the tail), and squares that overflow float while the
  // values are finite, take the exact double pass: no false Inf in an exploding gradient's norm.
  at::Tensor g = at::zeros({4096});
  g[100] = kNan;
  const GradStats nan = *ComputeGradStats(g);
  EXPECT_TRUE(nan.has_nan);
  EXPECT_FALSE(nan.all_zero);
  EXPECT_TRUE(std::isnan(*nan.norm));

  at::Tensor h = at::ones({4096});
  h[2000] = -kInf;
  const GradStats inf = *ComputeGradStats(h);
  EXPECT_FALSE(inf.has_nan);
  EXPECT_TRUE(std::isinf(*inf.norm));

  at::Tensor big = at::full({4096}, 1e20f);
  const GradStats exploding = *ComputeGradStats(big);
  ASSERT_TRUE(std::isfinite(*exploding.norm));
  EXPECT_NEAR(*exploding.norm, 1e20 * 64, 1e20 * 64 * 1e-6);  // sqrt(4096) * 1e20.
  EXPECT_NEAR(*exploding.mean, 1e20, 1e20 * 1e-6);

  // One non-zero element anywhere is not "all zero", and a zero gradient across many blocks is.
  for (const int64_t at : {int64_t{0}, int64_t{31}, int64_t{1024}, int64_t{70001}}) {
    at::Tensor one = at::zeros({70002});
    one[at] = 1e-30f;
    EXPECT_FALSE(ComputeGradStats(one)->all_zero) << at;
  }
  EXPECT_TRUE(ComputeGradStats(at::zeros({70002}))->all_zero);
  at::Tensor negative_zero = at::full({100}, -0.0f);
  EXPECT_TRUE(ComputeGradStats(negative_zero)->all_zero);
}

TEST_F(StatsTest, GradFlags) {
  const GradStats zero = *ComputeGradStats(at::zeros({10, 10}));
  EXPECT_TRUE(zero.all_zero);
  EXPECT_EQ(*zero.norm, 0.0);
  EXPECT_EQ(*zero.mean, 0.0);

  at::Tensor g = at::zeros({10});
  g[9] = kNan;  // In the scalar tail of the 4-wide loop.
  const GradStats nan = *ComputeGradStats(g);
  EXPECT_TRUE(nan.has_nan);
  EXPECT_FALSE(nan.all_zero);
  EXPECT_TRUE(std::isnan(*nan.norm));

  at::Tensor h = at::ones({16});
  h[2] = kInf;
  const GradStats inf = *ComputeGradStats(h);
  EXPECT_FALSE(inf.has_nan);
  EXPECT_TRUE(std::isinf(*inf.norm));

  const GradStats empty = *ComputeGradStats(at::empty({0}));
  EXPECT_FALSE(empty.norm.has_value());
  EXPECT_FALSE(empty.all_zero);
  const GradStats ints = *ComputeGradStats(at::ones({4}, at::kLong));
  EXPECT_FALSE(ints.norm.has_value());
}

TEST(DtypeNameTest, MatchesTorchSpelling) {
  EXPECT_EQ(DtypeName(at::kFloat), "torch.float32");
  EXPECT_EQ(DtypeName(at::kDouble), "torch.float64");
  EXPECT_EQ(DtypeName(at::kHalf), "torch.float16");
  EXPECT_EQ(DtypeName(at::kBFloat16), "torch.bfloat16");
  EXPECT_EQ(DtypeName(at::kLong), "torch.int64");
  EXPECT_EQ(DtypeName(at::kBool), "torch.bool");
  EXPECT_EQ(DtypeName(at::kByte), "torch.uint8");
}

}  // namespace
}  // namespace tracetorch::agent
