#include "agent/deferred_stats.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/cuda_support.h"

namespace tracetorch::agent {
namespace {

// Slots of the packed tensor statistics.
enum TensorSlot { kCount, kMean, kM2, kMin, kMax, kNan, kInf, kNegInf, kZero, kTensorSlots };
// Slots of the packed counts (StatsMode::kNonFiniteOnly).
enum CountSlot { kCountNan, kCountInf, kCountNegInf, kCountZero, kCountSlots };
// Slots of the packed gradient statistics.
enum GradSlot { kNorm, kSum, kAnyNan, kAnyNonZero, kGradSlots };

bool Reducible(const at::Tensor& t) {
  return IsStatsDtype(t.scalar_type()) && t.numel() > 0 && t.layout() == c10::kStrided &&
         !t.is_meta() && !t.is_quantized();
}

// The tensor in the dtype its reductions run in: float64 stays, narrower floats become float32.
at::Tensor Working(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? t : t.to(at::kFloat);
}

// Every value is a 0-dim float64 tensor on the tensor's device; nothing leaves the device.
at::Tensor PackTensorStats(const at::Tensor& x, StatsMode mode) {
  const at::Tensor nan = at::isnan(x).sum(at::kDouble);
  const at::Tensor inf = at::isinf(x).sum(at::kDouble);
  // What tells a mask (trace/nonfinite.h): how many Infs are -Inf, and how many elements are 0
  // (the finite part is all zero when zeros + NaN + Inf cover every element).
  constexpr double kNegInfValue = -std::numeric_limits<double>::infinity();
  const at::Tensor neg_inf = at::eq(x, kNegInfValue).sum(at::kDouble);
  const at::Tensor zero = at::eq(x, 0).sum(at::kDouble);
  if (mode == StatsMode::kNonFiniteOnly) return at::stack({nan, inf, neg_inf, zero});
  const at::Tensor w = Working(x);
  const at::Tensor not_finite = at::logical_not(at::isfinite(w));
  const at::Tensor count = x.numel() - not_finite.sum(at::kDouble);
  const at::Tensor mean = w.masked_fill(not_finite, 0).sum(at::kDouble) / count.clamp_min(1);
  // Two passes (centred), as torch's own std: accurate when |mean| >> std.
  const at::Tensor m2 =
      (w - mean.to(w.scalar_type())).masked_fill(not_finite, 0).square().sum(at::kDouble);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const at::Tensor mn = w.masked_fill(not_finite, kInf).min().to(at::kDouble);
  const at::Tensor mx = w.masked_fill(not_finite, -kInf).max().to(at::kDouble);
  return at::stack({count, mean, m2, mn, mx, nan, inf, neg_inf, zero});
}

at::Tensor PackGradStats(const at::Tensor& g) {
  const at::Tensor w = Working(g);
  return at::stack({at::linalg_vector_norm(w, 2, at::OptionalIntArrayRef{}, false, at::kDouble),
                    w.sum(at::kDouble), at::isnan(w).any().to(at::kDouble),
                    (w != 0).any().to(at::kDouble)});
}

}  // namespace

absl::StatusOr<std::shared_ptr<DeferredStats>> DeferredStats::LaunchTensor(const at::Tensor& tensor,
                                                                           StatsMode mode) {
  if (!tensor.defined()) return absl::InvalidArgumentError("undefined tensor");
  try {
    if (!Reducible(tensor)) {
      return std::shared_ptr<DeferredStats>(new DeferredStats(Kind::kNone, mode));
    }
    c10::NoGradGuard no_grad;
    std::shared_ptr<DeferredStats> d(new DeferredStats(Kind::kTensor, mode));
    d->numel_ = tensor.numel();
    d->host_ = CopyToHostAsync(PackTensorStats(tensor.detach(), mode), &d->done_);
    return d;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("launching tensor statistics: ", e.what()));
  }
}

absl::StatusOr<std::shared_ptr<DeferredStats>> DeferredStats::LaunchGrad(const at::Tensor& grad) {
  if (!grad.defined()) return absl::InvalidArgumentError("undefined gradient");
  try {
    if (!Reducible(grad)) {
      return std::shared_ptr<DeferredStats>(new DeferredStats(Kind::kNone, StatsMode::kFull));
    }
    c10::NoGradGuard no_grad;
    std::shared_ptr<DeferredStats> d(new DeferredStats(Kind::kGrad, StatsMode::kFull));
    d->numel_ = grad.numel();
    d->host_ = CopyToHostAsync(PackGradStats(grad.detach()), &d->done_);
    return d;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("launching gradient statistics: ", e.what()));
  }
}

bool DeferredStats::Done() {
  if (done_ == nullptr) return true;
  if (!done_->Done()) return false;
  done_.reset();  // Frees the event.
  return true;
}

bool DeferredStats::WaitUntil(absl::Time deadline) {
  if (done_ == nullptr) return true;
  if (!done_->WaitUntil(deadline)) return false;
  done_.reset();
  return true;
}

TensorStats DeferredStats::Tensor() const {
  TensorStats s;
  if (kind_ != Kind::kTensor) return s;
  const double* v = host_.data_ptr<double>();
  // The mask facts, set only for a tensor holding NaN/Inf (as the CPU kernel does).
  auto facts = [&](double nan, double inf, double neg_inf, double zero) {
    s.nan_count = static_cast<int64_t>(nan);
    s.inf_count = static_cast<int64_t>(inf);
    if (s.nan_count + s.inf_count == 0) return;
    s.neg_inf_count = static_cast<int64_t>(neg_inf);
    s.finite_all_zero = static_cast<int64_t>(zero + nan + inf) == numel_;
  };
  if (mode_ == StatsMode::kNonFiniteOnly) {
    facts(v[kCountNan], v[kCountInf], v[kCountNegInf], v[kCountZero]);
    return s;
  }
  facts(v[kNan], v[kInf], v[kNegInf], v[kZero]);
  const double count = v[kCount];
  if (count > 0) {
    s.mean = v[kMean];
    s.std = std::sqrt(std::max(0.0, v[kM2] / count));
    s.min = v[kMin];
    s.max = v[kMax];
  }
  return s;
}

GradStats DeferredStats::Grad() const {
  GradStats g;
  if (kind_ != Kind::kGrad) return g;
  const double* v = host_.data_ptr<double>();
  g.norm = v[kNorm];
  g.mean = v[kSum] / static_cast<double>(numel_);
  g.has_nan = v[kAnyNan] != 0;
  g.all_zero = v[kAnyNonZero] == 0;
  return g;
}

}  // namespace tracetorch::agent
