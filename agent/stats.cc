#include "agent/stats.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace tracetorch::agent {
namespace {

// ---- Vector helpers (GCC vector extensions: SSE2 everywhere, AVX2 in the avx2 clones) ----------
// The 256-bit vectors never cross a non-inlined call boundary, so the ABI note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef decltype(v4d{} != v4d{}) v4l;  // Lane mask type of a v4d comparison.

#define TT_ALWAYS_INLINE inline __attribute__((always_inline))
#define TT_CLONES __attribute__((target_clones("avx2", "default")))

TT_ALWAYS_INLINE v4d Load4(const double* p) {
  v4d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
TT_ALWAYS_INLINE v4d Load4(const float* p) {
  v4f f;
  std::memcpy(&f, p, sizeof f);
  return __builtin_convertvector(f, v4d);
}
TT_ALWAYS_INLINE v4d Splat(double x) { return v4d{x, x, x, x}; }

constexpr double kInf = std::numeric_limits<double>::infinity();

// Partial moments over the finite elements of part of a tensor. Sums are of (x - shift): shifting
// by a value near the data keeps sum-of-squares accurate when |mean| >> std.
struct Moments {
  double sum = 0;
  double sumsq = 0;
  double min = kInf;
  double max = -kInf;
  int64_t finite = 0;
  int64_t nan = 0;
  int64_t inf = 0;
  // Exact pass only: what tells a mask (trace/nonfinite.h).
  int64_t neg_inf = 0;
  int64_t nonzero = 0;  // Finite elements that are not 0.

  void Merge(const Moments& o) {
    sum += o.sum;
    sumsq += o.sumsq;
    min = std::min(min, o.min);
    max = std::max(max, o.max);
    finite += o.finite;
    nan += o.nan;
    inf += o.inf;
    neg_inf += o.neg_inf;
    nonzero += o.nonzero;
  }
};

// Adds one fast pass's partial result to `m`; false when the pass met a non-finite value.
inline bool Commit(double sum, double sumsq, double mn, double mx, int64_t n, Moments* m) {
  if (!std::isfinite(sum) || !std::isfinite(sumsq)) return false;
  m->sum += sum;
  m->sumsq += sumsq;
  m->min = std::min(m->min, mn);
  m->max = std::max(m->max, mx);
  m->finite += n;
  return true;
}

// One pass assuming every element is finite. Returns false when some element was NaN or +-Inf; the
// moments are then meaningless and the caller runs the exact pass. A non-finite element always
// makes the shifted sum non-finite (NaN and Inf propagate through subtraction and addition), so the
// check costs nothing per element. (Finite doubles whose squares overflow also take the exact pass,
// which gives the same result.)
template <typename T>
TT_ALWAYS_INLINE bool FastMomentsBody(const T* p, int64_t n, double shift, Moments* m) {
  v4d s0 = Splat(0), s1 = Splat(0), q0 = Splat(0), q1 = Splat(0);
  v4d mn0 = Splat(kInf), mn1 = Splat(kInf), mx0 = Splat(-kInf), mx1 = Splat(-kInf);
  const v4d k = Splat(shift);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v4d a = Load4(p + i);
    const v4d b = Load4(p + i + 4);
    mn0 = a < mn0 ? a : mn0;
    mn1 = b < mn1 ? b : mn1;
    mx0 = a > mx0 ? a : mx0;
    mx1 = b > mx1 ? b : mx1;
    const v4d da = a - k;
    const v4d db = b - k;
    s0 += da;
    s1 += db;
    q0 += da * da;
    q1 += db * db;
  }
  double sum = 0, sumsq = 0, mn = kInf, mx = -kInf;
  for (; i < n; ++i) {
    const double x = static_cast<double>(p[i]);
    mn = x < mn ? x : mn;
    mx = x > mx ? x : mx;
    const double d = x - shift;
    sum += d;
    sumsq += d * d;
  }
  for (int j = 0; j < 4; ++j) {
    sum += s0[j] + s1[j];
    sumsq += q0[j] + q1[j];
    mn = std::min({mn, mn0[j], mn1[j]});
    mx = std::max({mx, mx0[j], mx1[j]});
  }
  return Commit(sum, sumsq, mn, mx, n, m);
}

// Exact pass: classifies every element.
template <typename T>
TT_ALWAYS_INLINE void ExactMomentsBody(const T* p, int64_t n, double shift, bool with_moments,
                                       Moments* m) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(p[i]);
    if (std::isnan(x)) {
      ++m->nan;
    } else if (std::isinf(x)) {
      ++m->inf;
      m->neg_inf += x < 0 ? 1 : 0;
    } else {
      m->nonzero += x != 0 ? 1 : 0;
      if (!with_moments) continue;
      const double d = x - shift;
      m->sum += d;
      m->sumsq += d * d;
      m->min = std::min(m->min, x);
      m->max = std::max(m->max, x);
      ++m->finite;
    }
  }
}

// True when every element is finite.
template <typename T>
TT_ALWAYS_INLINE bool AllFiniteBody(const T* p, int64_t n) {
  v4d nf0 = Splat(0), nf1 = Splat(0);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v4d a = Load4(p + i);
    const v4d b = Load4(p + i + 4);
    nf0 += a - a;
    nf1 += b - b;
  }
  double bad = 0;
  for (; i < n; ++i) {
    const double x = static_cast<double>(p[i]);
    bad += x - x;
  }
  for (int j = 0; j < 4; ++j) bad += nf0[j] + nf1[j];
  return bad == 0;  // NaN compares unequal.
}

struct GradSums {
  double sum = 0;
  double sumsq = 0;
  int64_t nan = 0;
  int64_t nonzero = 0;
  void Merge(const GradSums& o) {
    sum += o.sum;
    sumsq += o.sumsq;
    nan += o.nan;
    nonzero += o.nonzero;
  }
};

template <typename T>
TT_ALWAYS_INLINE void GradBody(const T* p, int64_t n, GradSums* g) {
  v4d s = Splat(0), q = Splat(0);
  v4l nan = {0, 0, 0, 0}, nz = {0, 0, 0, 0};
  const v4d zero = Splat(0);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const v4d a = Load4(p + i);
    s += a;
    q += a * a;
    nan -= (a != a);  // Comparisons give -1 (true) or 0 per lane.
    nz -= (a != zero);
  }
  for (; i < n; ++i) {
    const double x = static_cast<double>(p[i]);
    g->sum += x;
    g->sumsq += x * x;
    g->nan += std::isnan(x) ? 1 : 0;
    g->nonzero += x != 0 ? 1 : 0;
  }
  for (int j = 0; j < 4; ++j) {
    g->sum += s[j];
    g->sumsq += q[j];
    g->nan += nan[j];
    g->nonzero += nz[j];
  }
}

// float32 with AVX2 + FMA: everything in float lanes within blocks of kBlock elements (each lane
// adds at most kBlock/32 terms, so the float partial sums stay within a few ulps), and the block
// partials are widened into double accumulators. Half the instructions per element of a
// convert-to-double loop, so the pass runs near memory speed. A non-finite element makes a float
// partial non-finite, as in the double version; so do finite values whose squares overflow float
// (|x| > ~1e19), which then take the exact double pass.
// acc + the 8 floats of v, widened to double.
__attribute__((target("avx2,fma"), always_inline)) inline __m256d WidenAdd(__m256d acc, __m256 v) {
  acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

__attribute__((target("avx2,fma"))) bool FastMomentsF32Avx2(const float* p, int64_t n, double shift,
                                                            Moments* m) {
  constexpr int64_t kBlock = 1024;
  const __m256 k = _mm256_set1_ps(static_cast<float>(shift));  // shift is an element: exact.
  __m256d sum_d = _mm256_setzero_pd(), sumsq_d = sum_d;
  __m256 mn0 = _mm256_set1_ps(std::numeric_limits<float>::infinity()), mn1 = mn0;
  __m256 mx0 = _mm256_set1_ps(-std::numeric_limits<float>::infinity()), mx1 = mx0;
  int64_t i = 0;
  const int64_t vector_end = n - n % 32;
  while (i < vector_end) {
    const int64_t block_end = std::min(vector_end, i + kBlock);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    __m256 q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    for (; i < block_end; i += 32) {
      const __m256 v0 = _mm256_loadu_ps(p + i);
      const __m256 v1 = _mm256_loadu_ps(p + i + 8);
      const __m256 v2 = _mm256_loadu_ps(p + i + 16);
      const __m256 v3 = _mm256_loadu_ps(p + i + 24);
      mn0 = _mm256_min_ps(mn0, _mm256_min_ps(v0, v1));
      mx0 = _mm256_max_ps(mx0, _mm256_max_ps(v0, v1));
      mn1 = _mm256_min_ps(mn1, _mm256_min_ps(v2, v3));
      mx1 = _mm256_max_ps(mx1, _mm256_max_ps(v2, v3));
      const __m256 a = _mm256_sub_ps(v0, k);
      const __m256 b = _mm256_sub_ps(v1, k);
      const __m256 c = _mm256_sub_ps(v2, k);
      const __m256 d = _mm256_sub_ps(v3, k);
      s0 = _mm256_add_ps(s0, a);
      s1 = _mm256_add_ps(s1, b);
      s2 = _mm256_add_ps(s2, c);
      s3 = _mm256_add_ps(s3, d);
      q0 = _mm256_fmadd_ps(a, a, q0);
      q1 = _mm256_fmadd_ps(b, b, q1);
      q2 = _mm256_fmadd_ps(c, c, q2);
      q3 = _mm256_fmadd_ps(d, d, q3);
    }
    sum_d = WidenAdd(WidenAdd(WidenAdd(WidenAdd(sum_d, s0), s1), s2), s3);
    sumsq_d = WidenAdd(WidenAdd(WidenAdd(WidenAdd(sumsq_d, q0), q1), q2), q3);
  }
  alignas(32) double sd[4], qd[4];
  alignas(32) float mnf[8], mxf[8];
  _mm256_store_pd(sd, sum_d);
  _mm256_store_pd(qd, sumsq_d);
  _mm256_store_ps(mnf, _mm256_min_ps(mn0, mn1));
  _mm256_store_ps(mxf, _mm256_max_ps(mx0, mx1));
  double sum = sd[0] + sd[1] + sd[2] + sd[3];
  double sumsq = qd[0] + qd[1] + qd[2] + qd[3];
  double mn = kInf, mx = -kInf;
  for (int j = 0; j < 8; ++j) {
    mn = std::min(mn, static_cast<double>(mnf[j]));
    mx = std::max(mx, static_cast<double>(mxf[j]));
  }
  for (; i < n; ++i) {
    const double x = p[i];
    mn = x < mn ? x : mn;
    mx = x > mx ? x : mx;
    const double dx = x - shift;
    sum += dx;
    sumsq += dx * dx;
  }
  return Commit(sum, sumsq, mn, mx, n, m);
}

// A float32 gradient with AVX2 + FMA: the sum and the sum of squares in float lanes within blocks
// of kBlock elements, widened into double per block (as FastMomentsF32Avx2 does for activations:
// half the instructions of the double loop, the accuracy of ATen's own float32 reductions), the
// non-zero count in integer lanes. Adds to `g` and returns true only when both sums are finite:
// a NaN or Inf element, or finite squares that overflow float (|x| > ~1e19), leave `g` untouched
// for the exact double pass (GradBody), which counts the NaNs.
__attribute__((target("avx2,fma"))) bool FastGradF32Avx2(const float* p, int64_t n, GradSums* g) {
  constexpr int64_t kBlock = 1024;
  const __m256 zero = _mm256_setzero_ps();
  __m256d sum_d = _mm256_setzero_pd(), sumsq_d = sum_d;
  int64_t nonzero = 0;
  int64_t i = 0;
  const int64_t vector_end = n - n % 32;
  while (i < vector_end) {
    const int64_t block_end = std::min(vector_end, i + kBlock);
    __m256 s0 = zero, s1 = zero, s2 = zero, s3 = zero;
    __m256 q0 = zero, q1 = zero, q2 = zero, q3 = zero;
    __m256i nz = _mm256_setzero_si256();  // Per lane at most kBlock / 8 counts: no overflow.
    for (; i < block_end; i += 32) {
      const __m256 v0 = _mm256_loadu_ps(p + i);
      const __m256 v1 = _mm256_loadu_ps(p + i + 8);
      const __m256 v2 = _mm256_loadu_ps(p + i + 16);
      const __m256 v3 = _mm256_loadu_ps(p + i + 24);
      s0 = _mm256_add_ps(s0, v0);
      s1 = _mm256_add_ps(s1, v1);
      s2 = _mm256_add_ps(s2, v2);
      s3 = _mm256_add_ps(s3, v3);
      q0 = _mm256_fmadd_ps(v0, v0, q0);
      q1 = _mm256_fmadd_ps(v1, v1, q1);
      q2 = _mm256_fmadd_ps(v2, v2, q2);
      q3 = _mm256_fmadd_ps(v3, v3, q3);
      // A comparison is -1 per true lane; NaN is unequal to zero, as in GradBody.
      nz = _mm256_sub_epi32(nz, _mm256_castps_si256(_mm256_cmp_ps(v0, zero, _CMP_NEQ_UQ)));
      nz = _mm256_sub_epi32(nz, _mm256_castps_si256(_mm256_cmp_ps(v1, zero, _CMP_NEQ_UQ)));
      nz = _mm256_sub_epi32(nz, _mm256_castps_si256(_mm256_cmp_ps(v2, zero, _CMP_NEQ_UQ)));
      nz = _mm256_sub_epi32(nz, _mm256_castps_si256(_mm256_cmp_ps(v3, zero, _CMP_NEQ_UQ)));
    }
    sum_d = WidenAdd(WidenAdd(WidenAdd(WidenAdd(sum_d, s0), s1), s2), s3);
    sumsq_d = WidenAdd(WidenAdd(WidenAdd(WidenAdd(sumsq_d, q0), q1), q2), q3);
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), nz);
    for (const int32_t c : lanes) nonzero += c;
  }
  alignas(32) double sd[4], qd[4];
  _mm256_store_pd(sd, sum_d);
  _mm256_store_pd(qd, sumsq_d);
  double sum = sd[0] + sd[1] + sd[2] + sd[3];
  double sumsq = qd[0] + qd[1] + qd[2] + qd[3];
  for (; i < n; ++i) {
    const double x = p[i];
    sum += x;
    sumsq += x * x;
    nonzero += x != 0 ? 1 : 0;
  }
  if (!std::isfinite(sum) || !std::isfinite(sumsq)) return false;
  g->sum += sum;
  g->sumsq += sumsq;
  g->nonzero += nonzero;
  return true;
}

bool HasAvx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
  }();
  return has;
}

// Non-inlined, per-ISA instantiations.
TT_CLONES bool FastMomentsF(const float* p, int64_t n, double shift, Moments* m) {
  return FastMomentsBody(p, n, shift, m);
}
TT_CLONES bool FastMomentsD(const double* p, int64_t n, double shift, Moments* m) {
  return FastMomentsBody(p, n, shift, m);
}
TT_CLONES bool AllFiniteF(const float* p, int64_t n) { return AllFiniteBody(p, n); }
TT_CLONES bool AllFiniteD(const double* p, int64_t n) { return AllFiniteBody(p, n); }
TT_CLONES void GradF(const float* p, int64_t n, GradSums* g) { GradBody(p, n, g); }
TT_CLONES void GradD(const double* p, int64_t n, GradSums* g) { GradBody(p, n, g); }

inline bool FastMoments(const float* p, int64_t n, double shift, Moments* m) {
  return HasAvx2() ? FastMomentsF32Avx2(p, n, shift, m) : FastMomentsF(p, n, shift, m);
}
inline bool FastMoments(const double* p, int64_t n, double shift, Moments* m) {
  return FastMomentsD(p, n, shift, m);
}
inline bool AllFinite(const float* p, int64_t n) { return AllFiniteF(p, n); }
inline bool AllFinite(const double* p, int64_t n) { return AllFiniteD(p, n); }
inline void Grad(const float* p, int64_t n, GradSums* g) {
  if (!HasAvx2() || !FastGradF32Avx2(p, n, g)) GradF(p, n, g);
}
inline void Grad(const double* p, int64_t n, GradSums* g) { GradD(p, n, g); }

// ---- Walking a strided tensor as contiguous spans -----------------------------------------------

struct Dim {
  int64_t size;
  int64_t stride;
};

// Dims ordered outer to inner with size-1 dims dropped and mergeable neighbours merged. Reductions
// do not depend on element order, so dims are sorted by stride (stride-0, expanded, dims
// outermost).
std::vector<Dim> CoalescedDims(const at::Tensor& t) {
  std::vector<Dim> dims;
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] != 1) dims.push_back({sizes[i], strides[i]});
  }
  auto key = [](const Dim& d) {
    return d.stride == 0 ? std::numeric_limits<int64_t>::max() : std::abs(d.stride);
  };
  std::stable_sort(dims.begin(), dims.end(),
                   [&](const Dim& a, const Dim& b) { return key(a) > key(b); });
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (!merged.empty() && merged.back().stride == d.stride * d.size) {
      merged.back() = {merged.back().size * d.size, d.stride};
    } else {
      merged.push_back(d);
    }
  }
  return merged;
}

// Elements convert to this type before reduction: double stays double, the rest become float.
template <typename S>
using KernelType = std::conditional_t<std::is_same_v<S, double>, double, float>;

constexpr int64_t kChunk = 1024;     // Elements gathered per conversion buffer.
constexpr int64_t kGrain = 1 << 16;  // Elements per at::parallel_for task.

// Calls fn(const KernelType<S>* p, int64_t n) -> bool over all elements of `t` (dtype S, CPU,
// strided), in spans; stops early when fn returns false. Returns false if stopped.
template <typename S, typename Fn>
bool VisitSpans(const at::Tensor& t, Fn&& fn) {
  using K = KernelType<S>;
  const S* base = static_cast<const S*>(t.data_ptr());
  const std::vector<Dim> dims = CoalescedDims(t);
  if (dims.empty()) {  // A single element.
    K one = static_cast<K>(base[0]);
    return fn(&one, 1);
  }
  const Dim inner = dims.back();
  const bool direct = std::is_same_v<S, K> && inner.stride == 1;
  K buf[kChunk];
  const size_t outer_dims = dims.size() - 1;
  std::vector<int64_t> index(outer_dims, 0);
  while (true) {
    int64_t offset = 0;
    for (size_t d = 0; d < outer_dims; ++d) offset += index[d] * dims[d].stride;
    const S* row = base + offset;
    if (direct) {
      if (!fn(reinterpret_cast<const K*>(row), inner.size)) return false;
    } else {
      for (int64_t start = 0; start < inner.size; start += kChunk) {
        const int64_t n = std::min(kChunk, inner.size - start);
        const S* src = row + start * inner.stride;
        if (inner.stride == 1) {
          for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<K>(src[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<K>(src[i * inner.stride]);
        }
        if (!fn(buf, n)) return false;
      }
    }
    // Advance the outer index (odometer); done when it wraps.
    size_t d = outer_dims;
    while (d > 0) {
      --d;
      if (++index[d] < dims[d].size) break;
      index[d] = 0;
      if (d == 0) return true;
    }
    if (outer_dims == 0) return true;
  }
}

// Contiguous tensors of the kernel's own type are split across threads; everything else walks
// spans on the calling thread. `body(p, n, &partial)` returns false to abort.
template <typename S, typename Acc, typename Body>
bool Reduce(const at::Tensor& t, Acc* total, Body&& body) {
  using K = KernelType<S>;
  const int64_t numel = t.numel();
  if (std::is_same_v<S, K> && t.is_contiguous() && numel >= 2 * kGrain) {
    const K* data = static_cast<const K*>(t.data_ptr());
    absl::Mutex mu;
    bool ok = true;
    at::parallel_for(0, numel, kGrain, [&](int64_t begin, int64_t end) {
      Acc local;
      const bool part_ok = body(data + begin, end - begin, &local);
      absl::MutexLock lock(&mu);
      ok = ok && part_ok;
      total->Merge(local);
    });
    return ok;
  }
  return VisitSpans<S>(t, [&](const K* p, int64_t n) { return body(p, n, total); });
}

template <typename S>
double FirstElement(const at::Tensor& t) {
  // data_ptr() already includes the storage offset; the first logical element is at offset 0.
  return static_cast<double>(static_cast<const S*>(t.data_ptr())[0]);
}

template <typename S>
double FirstFinite(const at::Tensor& t) {
  double found = 0;
  VisitSpans<S>(t, [&](const KernelType<S>* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      if (std::isfinite(static_cast<double>(p[i]))) {
        found = static_cast<double>(p[i]);
        return false;
      }
    }
    return true;
  });
  return found;
}

TensorStats Finish(const Moments& m, double shift, bool with_moments) {
  TensorStats s;
  s.nan_count = m.nan;
  s.inf_count = m.inf;
  if (m.nan + m.inf > 0) {  // The mask facts, for a tensor that holds NaN/Inf (the exact pass).
    s.neg_inf_count = m.neg_inf;
    s.finite_all_zero = m.nonzero == 0;
  }
  if (with_moments && m.finite > 0) {
    const double n = static_cast<double>(m.finite);
    const double dmean = m.sum / n;
    const double var = std::max(0.0, m.sumsq / n - dmean * dmean);
    s.mean = shift + dmean;
    s.std = std::sqrt(var);
    s.min = m.min;
    s.max = m.max;
  }
  return s;
}

template <typename S>
TensorStats CpuStats(const at::Tensor& t, StatsMode mode) {
  using K = KernelType<S>;
  if (mode == StatsMode::kNonFiniteOnly) {
    struct Flag {
      void Merge(const Flag&) {}
    } flag;
    const bool finite =
        Reduce<S>(t, &flag, [](const K* p, int64_t n, Flag*) { return AllFinite(p, n); });
    if (finite) return TensorStats{};
    Moments counts;
    Reduce<S>(t, &counts, [](const K* p, int64_t n, Moments* m) {
      ExactMomentsBody(p, n, 0.0, /*with_moments=*/false, m);
      return true;
    });
    return Finish(counts, 0.0, false);
  }
  double shift = FirstElement<S>(t);
  if (std::isfinite(shift)) {
    Moments fast;
    const bool all_finite = Reduce<S>(t, &fast, [shift](const K* p, int64_t n, Moments* m) {
      return FastMoments(p, n, shift, m);
    });
    if (all_finite) return Finish(fast, shift, true);
  }
  shift = FirstFinite<S>(t);
  Moments exact;
  Reduce<S>(t, &exact, [shift](const K* p, int64_t n, Moments* m) {
    ExactMomentsBody(p, n, shift, /*with_moments=*/true, m);
    return true;
  });
  return Finish(exact, shift, true);
}

template <typename S>
GradStats CpuGradStats(const at::Tensor& g) {
  using K = KernelType<S>;
  GradSums sums;
  Reduce<S>(g, &sums, [](const K* p, int64_t n, GradSums* acc) {
    Grad(p, n, acc);
    return true;
  });
  GradStats out;
  const double n = static_cast<double>(g.numel());
  out.norm = std::sqrt(sums.sumsq);
  out.mean = sums.sum / n;
  out.has_nan = sums.nan > 0;
  out.all_zero = sums.nonzero == 0;
  return out;
}

bool IsPlainCpu(const at::Tensor& t) {
  return t.device().is_cpu() && t.layout() == c10::kStrided && !t.is_quantized();
}

}  // namespace

at::Tensor DenseView(const at::Tensor& t) {
  if (!t.defined() || !t.is_nested()) return t;
  c10::NoGradGuard no_grad;
  at::DisableRecordFunctionGuard quiet;  // Our work is no op of the model's (agent/ops).
  return t.detach().to_padded_tensor(0);
}

bool IsStatsDtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
    case c10::ScalarType::Double:
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16:
      return true;
    default:
      return false;
  }
}

std::string_view DtypeName(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return "torch.float32";
    case c10::ScalarType::Double:
      return "torch.float64";
    case c10::ScalarType::Half:
      return "torch.float16";
    case c10::ScalarType::BFloat16:
      return "torch.bfloat16";
    case c10::ScalarType::Long:
      return "torch.int64";
    case c10::ScalarType::Int:
      return "torch.int32";
    case c10::ScalarType::Short:
      return "torch.int16";
    case c10::ScalarType::Char:
      return "torch.int8";
    case c10::ScalarType::Byte:
      return "torch.uint8";
    case c10::ScalarType::Bool:
      return "torch.bool";
    case c10::ScalarType::ComplexHalf:
      return "torch.complex32";
    case c10::ScalarType::ComplexFloat:
      return "torch.complex64";
    case c10::ScalarType::ComplexDouble:
      return "torch.complex128";
    case c10::ScalarType::QInt8:
      return "torch.qint8";
    case c10::ScalarType::QUInt8:
      return "torch.quint8";
    case c10::ScalarType::QInt32:
      return "torch.qint32";
    case c10::ScalarType::QUInt4x2:
      return "torch.quint4x2";
    case c10::ScalarType::QUInt2x4:
      return "torch.quint2x4";
    default:
      return "torch.unknown";
  }
}

absl::StatusOr<TensorStats> ComputeTensorStats(const at::Tensor& tensor, StatsMode mode) {
  if (!tensor.defined()) return absl::InvalidArgumentError("undefined tensor");
  try {
    if (!IsStatsDtype(tensor.scalar_type()) || tensor.numel() == 0 ||
        tensor.layout() != c10::kStrided || tensor.is_meta() || tensor.is_quantized()) {
      return TensorStats{};
    }
    if (!IsPlainCpu(tensor)) return ComputeTensorStatsWithAten(tensor, mode);
    switch (tensor.scalar_type()) {
      case c10::ScalarType::Float:
        return CpuStats<float>(tensor, mode);
      case c10::ScalarType::Double:
        return CpuStats<double>(tensor, mode);
      case c10::ScalarType::Half:
        return CpuStats<c10::Half>(tensor, mode);
      case c10::ScalarType::BFloat16:
        return CpuStats<c10::BFloat16>(tensor, mode);
      default:
        return TensorStats{};
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("computing tensor statistics: ", e.what()));
  }
}

absl::StatusOr<TensorStats> ComputeTensorStatsWithAten(const at::Tensor& tensor, StatsMode mode) {
  if (!tensor.defined()) return absl::InvalidArgumentError("undefined tensor");
  try {
    if (!IsStatsDtype(tensor.scalar_type()) || tensor.numel() == 0 ||
        tensor.layout() != c10::kStrided || tensor.is_meta() || tensor.is_quantized()) {
      return TensorStats{};
    }
    c10::NoGradGuard no_grad;
    const at::Tensor x = tensor.detach();
    TensorStats s;
    if (mode == StatsMode::kNonFiniteOnly) {
      // One device round trip when everything is finite.
      if (at::isfinite(x).all().item<bool>()) return s;
    }
    const at::Tensor counts = at::stack({at::isnan(x).sum(), at::isinf(x).sum()}).to(at::kCPU);
    s.nan_count = counts[0].item<int64_t>();
    s.inf_count = counts[1].item<int64_t>();
    if (s.nan_count + s.inf_count > 0) {  // The mask facts (trace/nonfinite.h).
      const at::Tensor facts = at::stack({at::eq(x, -std::numeric_limits<double>::infinity()).sum(),
                                          at::logical_and(at::isfinite(x), at::ne(x, 0)).sum()})
                                   .to(at::kCPU);
      s.neg_inf_count = facts[0].item<int64_t>();
      s.finite_all_zero = facts[1].item<int64_t>() == 0;
    }
    if (mode == StatsMode::kNonFiniteOnly) return s;
    const at::Tensor finite = s.nan_count + s.inf_count == 0
                                  ? x.reshape({-1}).to(at::kDouble)
                                  : x.masked_select(at::isfinite(x)).to(at::kDouble);
    if (finite.numel() == 0) return s;
    const at::Tensor packed =
        at::stack({finite.mean(), finite.std(/*unbiased=*/false), finite.min(), finite.max()})
            .to(at::kCPU);
    const double* v = packed.data_ptr<double>();
    s.mean = v[0];
    s.std = v[1];
    s.min = v[2];
    s.max = v[3];
    return s;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("computing tensor statistics: ", e.what()));
  }
}

absl::StatusOr<GradStats> ComputeGradStats(const at::Tensor& grad) {
  if (!grad.defined()) return absl::InvalidArgumentError("undefined gradient");
  try {
    GradStats out;
    if (!IsStatsDtype(grad.scalar_type()) || grad.layout() != c10::kStrided || grad.is_meta() ||
        grad.is_quantized()) {
      return out;
    }
    if (grad.numel() == 0) return out;
    if (IsPlainCpu(grad)) {
      switch (grad.scalar_type()) {
        case c10::ScalarType::Float:
          return CpuGradStats<float>(grad);
        case c10::ScalarType::Double:
          return CpuGradStats<double>(grad);
        case c10::ScalarType::Half:
          return CpuGradStats<c10::Half>(grad);
        case c10::ScalarType::BFloat16:
          return CpuGradStats<c10::BFloat16>(grad);
        default:
          return out;
      }
    }
    c10::NoGradGuard no_grad;
    const at::Tensor g = grad.detach().to(at::kDouble);
    const at::Tensor packed = at::stack({g.norm(), g.mean(), at::isnan(g).any().to(at::kDouble),
                                         (g != 0).any().to(at::kDouble)})
                                  .to(at::kCPU);
    const double* v = packed.data_ptr<double>();
    out.norm = v[0];
    out.mean = v[1];
    out.has_nan = v[2] != 0;
    out.all_zero = v[3] == 0;
    return out;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("computing gradient statistics: ", e.what()));
  }
}

}  // namespace tracetorch::agent
