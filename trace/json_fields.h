// Internal to trace/: the key names of the trace JSON layout, shared by the record writer
// (json_record_writer.cc) and the record reader (json_reader.cc). Not installed; include json.h.
//
// Each table lists the keys of one JSON object in the order the Python library writes them. The
// writer emits that order; the reader looks a key up with FindField, trying the slot after the
// previous key first, so a file in canonical order costs one comparison per key.
//
// Header-only, constant data; thread-safe.
#ifndef TRACETORCH_TRACE_JSON_FIELDS_H_
#define TRACETORCH_TRACE_JSON_FIELDS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tracetorch {
namespace json_internal {

// The keys of a layer object ("layers"[i]), in writing order.
enum LayerField {
  kName,
  kType,
  kFullName,
  kDepth,
  kParams,
  kInputs,
  kOutputs,
  kLatency,
  kLatencyMin,
  kLatencyMax,
  kLatencyMean,
  kForwardCount,
  kHasNan,
  kHasInf,
  kGradNorm,
  kGradMean,
  kGradHasNan,
  kHasZeroGrad,
  kGradInNorm,
  kGradInMean,
  kGradInHasNan,
  kBwdLatency,
  kBwdLatencyMin,
  kBwdLatencyMax,
  kBwdLatencyMean,
  kBackwardCount,
  kFwdMemAlloc,
  kFwdMemReserved,
  kBwdMemAlloc,
  kBwdMemReserved,
  kNumLayerFields,
};
inline constexpr std::string_view kLayerFields[kNumLayerFields] = {
    "name",
    "type",
    "full_name",
    "depth",
    "params",
    "inputs",
    "outputs",
    "latency_ms",
    "latency_ms_min",
    "latency_ms_max",
    "latency_ms_mean",
    "forward_count",
    "has_nan",
    "has_inf",
    "grad_norm",
    "grad_mean",
    "grad_has_nan",
    "has_zero_grad",
    "grad_in_norm",
    "grad_in_mean",
    "grad_in_has_nan",
    "bwd_latency_ms",
    "bwd_latency_ms_min",
    "bwd_latency_ms_max",
    "bwd_latency_ms_mean",
    "backward_count",
    "fwd_mem_alloc_delta",
    "fwd_mem_reserved_delta",
    "bwd_mem_alloc_delta",
    "bwd_mem_reserved_delta",
};
// The reader keeps a bit per layer field it has seen.
static_assert(kNumLayerFields <= 64);

// The keys of a tensor object ("inputs"[i], "outputs"[i]), in writing order.
enum TensorField {
  kShape,
  kDtype,
  kDevice,
  kMean,
  kStd,
  kMin,
  kMax,
  kNanCount,
  kInfCount,
  // Ours, written only when set (a -Inf, a finite part that is all zero): what trace/nonfinite.h
  // tells a mask by. The library ignores them.
  kNegInfCount,
  kFiniteAllZero,
  kNonFinite,  // Ours: the counts of a tensor without statistics (TensorInfo::nonfinite).
  kNumTensorFields,
};
inline constexpr std::string_view kTensorFields[kNumTensorFields] = {
    "shape",     "dtype",         "device",          "mean",      "std", "min", "max", "nan_count",
    "inf_count", "neg_inf_count", "finite_all_zero", "nonfinite",
};

// A layer key of ours outside kLayerFields (which mirrors the library's dataclass, see
// json_layer_keys.h): written after "has_inf" only when true (LayerTrace::inf_in_masks_only).
inline constexpr std::string_view kInfInMasksOnlyKey = "inf_in_masks_only";

// The modelled keys of the metadata object, in writing order. Others are kept as
// TraceMetadata::extra.
enum MetadataField {
  kModelName,
  kPytorchVersion,
  kPythonVersion,
  kPlatform,
  kCudaAvailable,
  kCudaVersion,
  kActiveDevice,
  kTotalTimeMs,
  kNanOrigin,
  kNumMetadataFields,
};
inline constexpr std::string_view kMetadataFields[kNumMetadataFields] = {
    "model_name",   "pytorch_version", "python_version", "platform",   "cuda_available",
    "cuda_version", "active_device",   "total_time_ms",  "nan_origin",
};

// Equality for short keys without a call to memcmp: 8-byte words, the last one overlapping.
inline bool SameKey(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  if (n < 8) {
    for (size_t i = 0; i < n; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }
  uint64_t x;
  uint64_t y;
  for (size_t i = 0; i + 8 < n; i += 8) {
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    if (x != y) return false;
  }
  std::memcpy(&x, a.data() + n - 8, 8);
  std::memcpy(&y, b.data() + n - 8, 8);
  return x == y;
}

// The index of `key` in `names`, trying `guess` first (any value is allowed; out of range means no
// guess); -1 when `key` is not in the table.
template <size_t N>
int FindField(const std::string_view (&names)[N], std::string_view key, int guess) {
  if (guess >= 0 && static_cast<size_t>(guess) < N && SameKey(names[guess], key)) return guess;
  for (size_t i = 0; i < N; ++i) {
    if (SameKey(names[i], key)) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace json_internal
}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_JSON_FIELDS_H_
