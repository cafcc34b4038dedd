// The NaN/Inf count of an op's output, as TraceSession(model, ops="on_nan") records it for every
// op of every step (OpRecorderOptions::nonfinite_only): almost always the answer is "none", so the
// question is asked in the cheapest way that stays exact.
//
// CountNonFinite(t): float32 and float64 CPU tensors whose elements fill one dense block of memory
// (contiguous, channels-last or any other non-overlapping dense layout) are scanned once, in the
// tensor's own precision, by a vectorised kernel (8 float lanes on AVX2 machines, 4 doubles; four
// independent accumulators), which only answers "all finite?". Only when it says no, or for any
// other tensor (float16/bfloat16, strided views, other devices), are the counts computed by
// agent::ComputeTensorStats(kNonFiniteOnly). Integer, bool and complex tensors, empty and
// non-strided ones count {0, 0}, as ComputeTensorStats says.
//
// Errors: never throws; nullopt when ComputeTensorStats fails (an undefined tensor, a libtorch
// error). Thread-safe: no shared state. Large tensors (>= 128Ki elements) are split over
// at::parallel_for, as the statistics kernel is.
#ifndef TRACETORCH_AGENT_OPS_FINITE_SCAN_H_
#define TRACETORCH_AGENT_OPS_FINITE_SCAN_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "trace/record.h"

namespace tracetorch::ops {

std::optional<NonFiniteCounts> CountNonFinite(const at::Tensor& t);

// The kernel: true when all `n` elements at `p` are finite. Exposed for tests.
bool AllFinite(const float* p, int64_t n);
bool AllFinite(const double* p, int64_t n);

}  // namespace tracetorch::ops

#endif  // TRACETORCH_AGENT_OPS_FINITE_SCAN_H_
