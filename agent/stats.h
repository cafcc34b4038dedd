// Activation and gradient statistics of one tensor, in one fused pass.
//
// ComputeTensorStats reads every element once and returns mean, population std, min and max over
// the finite elements, and NaN / +-Inf counts over all elements:
//  - float32, float64, float16 and bfloat16 tensors on the CPU, contiguous or strided (any strides,
//    expanded dims included), are reduced by a vectorised kernel that accumulates in double
//    (float32 and narrower on AVX2+FMA machines: float partial sums over blocks of 1024 elements,
//    widened to double, which halves the cost per element; relative error ~1e-7, the accuracy of
//    ATen's own float32 reductions; gradients likewise); a tensor with no non-finite value costs
//    one pass, one that holds NaN/Inf costs a second, exact pass in double;
//  - other devices (CUDA, ...) are reduced with ATen operators (ComputeTensorStatsWithAten), which
//    synchronise with the device;
//  - non-float dtypes (integers, bool, complex), empty tensors and non-strided layouts (sparse,
//    mkldnn) give all-null statistics with zero counts (TensorStats{}); meta tensors likewise.
// With StatsMode::kNonFiniteOnly mean/std/min/max are left null and only the NaN/Inf counts are
// produced: one finiteness pass, and a counting pass only when the tensor is not all finite.
// A tensor that holds a NaN or an Inf also gets, from that exact pass, the facts that tell a mask
// (trace/nonfinite.h): neg_inf_count and finite_all_zero (0 and false for a finite tensor).
//
// Errors: never throws. A libtorch error (c10::Error) becomes Internal; an undefined tensor is
// InvalidArgument.
//
// Thread-safe: no shared state. Large contiguous CPU tensors are split over at::parallel_for.
#ifndef TRACETORCH_AGENT_STATS_H_
#define TRACETORCH_AGENT_STATS_H_

#include <ATen/core/Tensor.h>

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "trace/record.h"

namespace tracetorch::agent {

enum class StatsMode {
  kFull,          // mean, std, min, max, nan_count, inf_count.
  kNonFiniteOnly  // nan_count and inf_count only (capture_stats=False).
};

// Example:
//   absl::StatusOr<TensorStats> s = ComputeTensorStats(at::randn({32, 256}), StatsMode::kFull);
//   if (s.ok() && s->mean) use(*s->mean);
absl::StatusOr<TensorStats> ComputeTensorStats(const at::Tensor& tensor, StatsMode mode);

// The same result computed with ATen operators on the tensor's own device (the path for non-CPU
// tensors; exposed to test it against the CPU kernel). Same null rules as ComputeTensorStats.
absl::StatusOr<TensorStats> ComputeTensorStatsWithAten(const at::Tensor& tensor, StatsMode mode);

// Statistics of a gradient, over ALL elements (non-finite ones included, as torch computes them):
// norm = sqrt(sum of squares) and mean (both NaN/Inf when the gradient holds such values), whether
// any element is NaN, and whether every element is exactly zero. An empty gradient has null norm
// and mean and all_zero = false. Non-float gradients give all-null values.
struct GradStats {
  std::optional<double> norm;
  std::optional<double> mean;
  bool has_nan = false;
  bool all_zero = false;
};
absl::StatusOr<GradStats> ComputeGradStats(const at::Tensor& grad);

// The dense tensor whose statistics and shape describe `t`: a nested tensor (what
// nn.TransformerEncoder's fast path passes between its layers with src_key_padding_mask) padded
// with zeros to its largest sequence (its statistics then count the padding's zeros); any other
// tensor itself. Throws what libtorch throws.
at::Tensor DenseView(const at::Tensor& t);

// The dtype as torch prints it: "torch.float32", "torch.int64", "torch.bool", ...
std::string_view DtypeName(c10::ScalarType type);

// True for the dtypes whose statistics are computed (float32/64, float16, bfloat16).
bool IsStatsDtype(c10::ScalarType type);

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_STATS_H_
