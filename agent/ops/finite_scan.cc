#include "agent/ops/finite_scan.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <cstring>
#include <exception>

#include "absl/status/statusor.h"
#include "agent/stats.h"

namespace tracetorch::ops {
namespace {

// GCC vector extensions: 256-bit vectors are two SSE2 registers in the default clone, one AVX
// register in the avx2 clone. They never cross a non-inlined call boundary.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8f __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));

#define TT_SCAN_CLONES __attribute__((target_clones("avx2", "default")))

template <typename V, typename T>
inline __attribute__((always_inline)) V Load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

// x - x is +0 for a finite x and NaN for NaN or +-Inf; a sum of +0s stays +0 and a NaN in it
// stays NaN (no fast-math here). So the accumulators end at 0 exactly when all elements are
// finite.
template <typename V, typename T>
inline __attribute__((always_inline)) bool AllFiniteBody(const T* p, int64_t n) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(T);
  constexpr int64_t kStep = 4 * kLanes;
  V a0{}, a1{}, a2{}, a3{};
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    const V x0 = Load<V>(p + i);
    const V x1 = Load<V>(p + i + kLanes);
    const V x2 = Load<V>(p + i + 2 * kLanes);
    const V x3 = Load<V>(p + i + 3 * kLanes);
    a0 += x0 - x0;
    a1 += x1 - x1;
    a2 += x2 - x2;
    a3 += x3 - x3;
  }
  T tail = 0;
  for (; i < n; ++i) tail += p[i] - p[i];
  const V a = (a0 + a1) + (a2 + a3);
  T sum = tail;
  for (int64_t k = 0; k < kLanes; ++k) sum += a[k];
  return sum == 0;  // NaN compares unequal.
}

TT_SCAN_CLONES bool AllFiniteF(const float* p, int64_t n) { return AllFiniteBody<v8f>(p, n); }
TT_SCAN_CLONES bool AllFiniteD(const double* p, int64_t n) { return AllFiniteBody<v4d>(p, n); }

constexpr int64_t kGrain = 1 << 16;  // Elements per at::parallel_for task.

template <typename T>
bool AllFiniteDense(const T* p, int64_t n) {
  if (n < 2 * kGrain) return AllFinite(p, n);
  std::atomic<bool> finite{true};
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    if (!finite.load(std::memory_order_relaxed)) return;
    if (!AllFinite(p + begin, end - begin)) finite.store(false, std::memory_order_relaxed);
  });
  return finite.load(std::memory_order_relaxed);
}

// True when `t` is known to be all finite after the fast scan; false when it was not scanned or
// holds a NaN/Inf.
bool ScannedFinite(const at::Tensor& t) {
  if (!t.is_cpu() || t.layout() != c10::kStrided || t.is_quantized() || t.numel() == 0 ||
      !t.is_non_overlapping_and_dense()) {
    return false;
  }
  // A dense tensor's elements are the numel() slots from its lowest address (negative strides
  // are not possible in torch).
  switch (t.scalar_type()) {
    case c10::ScalarType::Float:
      return AllFiniteDense(static_cast<const float*>(t.data_ptr()), t.numel());
    case c10::ScalarType::Double:
      return AllFiniteDense(static_cast<const double*>(t.data_ptr()), t.numel());
    default:
      return false;
  }
}

}  // namespace

bool AllFinite(const float* p, int64_t n) { return AllFiniteF(p, n); }
bool AllFinite(const double* p, int64_t n) { return AllFiniteD(p, n); }

std::optional<NonFiniteCounts> CountNonFinite(const at::Tensor& t) {
  try {
    if (t.defined() && ScannedFinite(t)) return NonFiniteCounts{};
  } catch (const std::exception&) {
    // Fall through: ComputeTensorStats reports it.
  }
  absl::StatusOr<TensorStats> counts =
      agent::ComputeTensorStats(t, agent::StatsMode::kNonFiniteOnly);
  if (!counts.ok()) return std::nullopt;
  return NonFiniteCounts{counts->nan_count, counts->inf_count, counts->neg_inf_count,
                         counts->finite_all_zero};
}

}  // namespace tracetorch::ops
