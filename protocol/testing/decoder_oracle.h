// The generated parser as the oracle of protocol/frame_decoder.h (not part of any product): for a
// byte string, whether ParseFromArray and DecodeEventBatch agree on accepting it and, when both
// do, on every value the daemon reads. Used by frame_decoder_test.cc and fuzz/frame_fuzz.cc.
//
// Header-only; thread-compatible.
#ifndef TRACETORCH_PROTOCOL_TESTING_DECODER_ORACLE_H_
#define TRACETORCH_PROTOCOL_TESTING_DECODER_ORACLE_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "protocol/codes.h"
#include "protocol/frame_decoder.h"
#include "trace/nonfinite.h"
#include "tracetorch/v1/agent.pb.h"

namespace tracetorch::protocol::testing {

namespace oracle_internal {

inline bool SameDouble(std::optional<double> a, bool has_b, double b) {
  if (a.has_value() != has_b) return false;
  return !has_b || std::memcmp(&*a, &b, sizeof(b)) == 0;  // Bitwise: NaN equals NaN.
}

inline bool SameStats(const std::optional<TensorStats>& a, const v1::TensorEvent& b) {
  if (a.has_value() != b.has_stats()) return false;
  if (!a.has_value()) return true;
  const v1::TensorStats& s = b.stats();
  return SameDouble(a->mean, s.has_mean(), s.mean()) && SameDouble(a->std, s.has_std(), s.std()) &&
         SameDouble(a->min, s.has_min(), s.min()) && SameDouble(a->max, s.has_max(), s.max()) &&
         a->nan_count == s.nan_count() && a->inf_count == s.inf_count() &&
         a->neg_inf_count == s.neg_inf_count() && a->finite_all_zero == s.finite_all_zero();
}

inline bool SameTensors(const std::vector<TensorInfo>& a,
                        const google::protobuf::RepeatedPtrField<v1::TensorEvent>& b) {
  if (a.size() != static_cast<size_t>(b.size())) return false;
  for (int i = 0; i < b.size(); ++i) {
    const TensorInfo& t = a[static_cast<size_t>(i)];
    const v1::TensorEvent& u = b[i];
    if (!std::equal(t.shape.begin(), t.shape.end(), u.shape().begin(), u.shape().end())) {
      return false;
    }
    if (t.dtype != DtypeName(u.dtype()) || t.device != DeviceName(u.device())) return false;
    if (!SameStats(t.stats, u)) return false;
  }
  return true;
}

class Collect : public wire::EventBatchVisitor {
 public:
  void OnForward(const wire::ForwardFields& e) override { forward.push_back(e); }
  void OnBackward(const BackwardEvent& e) override { backward.push_back(e); }
  std::vector<wire::ForwardFields> forward;
  std::vector<BackwardEvent> backward;
};

inline std::string CompareForward(const wire::ForwardFields& a, const v1::ForwardEvent& b) {
  bool nan = false, inf = false, masks_only = true;
  for (const v1::TensorEvent& t : b.outputs()) {
    const v1::TensorStats& st = t.stats();
    nan = nan || st.nan_count() > 0;
    if (st.inf_count() > 0) {
      inf = true;
      masks_only = masks_only && IsMaskCounts(st.nan_count(), st.inf_count(), st.neg_inf_count(),
                                              st.finite_all_zero());
    }
  }
  const bool inf_in_masks_only = inf && masks_only;
  const bool has_std = b.outputs_size() > 0 && b.outputs(0).stats().has_std();
  if (a.layer_id != b.layer_id() || a.step != b.step() ||
      !SameDouble(a.latency_ms, b.has_latency_ms(), b.latency_ms()) ||
      a.mem_alloc_delta.has_value() != b.has_mem_alloc_delta() ||
      a.mem_alloc_delta.value_or(0) != b.mem_alloc_delta() ||
      a.mem_reserved_delta.has_value() != b.has_mem_reserved_delta() ||
      a.mem_reserved_delta.value_or(0) != b.mem_reserved_delta() || a.inputs != b.inputs_size() ||
      a.outputs != b.outputs_size() || a.outputs_have_nan != nan || a.outputs_have_inf != inf ||
      a.outputs_inf_in_masks_only != inf_in_masks_only ||
      !SameDouble(a.first_output_std, has_std, has_std ? b.outputs(0).stats().std() : 0)) {
    return "forward fields differ: " + b.ShortDebugString();
  }
  std::vector<TensorInfo> inputs, outputs;
  wire::DecodeForwardTensors(a.bytes, &inputs, &outputs);
  if (!SameTensors(inputs, b.inputs()) || !SameTensors(outputs, b.outputs())) {
    return "forward tensors differ: " + b.ShortDebugString();
  }
  return "";
}

inline std::string CompareBackward(const BackwardEvent& a, const v1::BackwardEvent& b) {
  const BackwardSample& s = a.sample;
  if (a.layer_id != b.layer_id() || a.step != b.step() ||
      !SameDouble(s.latency_ms, b.has_latency_ms(), b.latency_ms()) ||
      !SameDouble(s.grad_norm, b.has_grad_norm(), b.grad_norm()) ||
      !SameDouble(s.grad_mean, b.has_grad_mean(), b.grad_mean()) ||
      !SameDouble(s.grad_in_norm, b.has_grad_in_norm(), b.grad_in_norm()) ||
      !SameDouble(s.grad_in_mean, b.has_grad_in_mean(), b.grad_in_mean()) ||
      s.grad_has_nan != b.grad_has_nan() || s.grad_all_zero != b.grad_all_zero() ||
      s.grad_in_has_nan != b.grad_in_has_nan() ||
      s.mem_alloc_delta.has_value() != b.has_mem_alloc_delta() ||
      s.mem_alloc_delta.value_or(0) != b.mem_alloc_delta() ||
      s.mem_reserved_delta.has_value() != b.has_mem_reserved_delta() ||
      s.mem_reserved_delta.value_or(0) != b.mem_reserved_delta()) {
    return "backward differs: " + b.ShortDebugString();
  }
  return "";
}

}  // namespace oracle_internal

// "" when DecodeEventBatch and v1::EventBatch::ParseFromArray agree on `batch`; else what differs.
inline std::string DecoderDisagreement(std::string_view batch) {
  using namespace oracle_internal;      // NOLINT(build/namespaces)
  google::protobuf::LogSilencer quiet;  // Refused UTF-8 would log every time.
  v1::EventBatch parsed;
  const bool generated_ok = parsed.ParseFromArray(batch.data(), static_cast<int>(batch.size()));
  Collect collected;
  absl::StatusOr<wire::EventBatchSummary> checked = wire::DecodeEventBatch(batch, nullptr);
  absl::StatusOr<wire::EventBatchSummary> decoded = wire::DecodeEventBatch(batch, &collected);
  if (checked.ok() != decoded.ok()) return "checking and decoding disagree";
  absl::StatusOr<wire::EventBatchSummary> skimmed = wire::SkimEventBatch(batch);
  if (!skimmed.ok() && generated_ok) return "SkimEventBatch refuses what ParseFromArray accepts";
  if (skimmed.ok() && decoded.ok() &&
      (skimmed->sequence != decoded->sequence ||
       skimmed->dropped_events != decoded->dropped_events ||
       skimmed->forward_events != decoded->forward_events ||
       skimmed->backward_events != decoded->backward_events ||
       skimmed->nan_origin != decoded->nan_origin ||
       skimmed->op_graph_json != decoded->op_graph_json ||
       skimmed->first_event != decoded->first_event)) {
    return "SkimEventBatch and DecodeEventBatch summarise differently";
  }
  if (generated_ok != decoded.ok()) {
    return absl::StrCat("ParseFromArray ", generated_ok ? "accepts" : "refuses",
                        " but DecodeEventBatch ", decoded.ok() ? "accepts" : "refuses");
  }
  if (!generated_ok) return "";
  const wire::EventBatchSummary& s = *decoded;
  if (s.sequence != parsed.sequence() || s.dropped_events != parsed.dropped_events() ||
      s.forward_events != static_cast<uint64_t>(parsed.forward_size()) ||
      s.backward_events != static_cast<uint64_t>(parsed.backward_size()) ||
      collected.forward.size() != static_cast<size_t>(parsed.forward_size()) ||
      collected.backward.size() != static_cast<size_t>(parsed.backward_size()) ||
      s.nan_origin.has_value() != parsed.has_nan_origin() ||
      s.op_graph_json != parsed.op_graph_json() ||
      s.first_event.has_value() != parsed.has_first_event() ||
      s.first_event.value_or(0) != parsed.first_event()) {
    return "batch fields differ: " + parsed.ShortDebugString();
  }
  if (s.nan_origin.has_value()) {
    const v1::NanOrigin& o = parsed.nan_origin();
    if (s.nan_origin->layer != o.layer() || s.nan_origin->step != o.step() ||
        s.nan_origin->is_nan != o.is_nan() || s.nan_origin->op != o.op() ||
        s.nan_origin->op_func != o.op_func() || s.nan_origin->op_module != o.op_module() ||
        s.nan_origin->backward != o.backward()) {
      return "nan_origin differs: " + o.ShortDebugString();
    }
  }
  for (int i = 0; i < parsed.forward_size(); ++i) {
    std::string d = CompareForward(collected.forward[static_cast<size_t>(i)], parsed.forward(i));
    if (!d.empty()) return d;
  }
  for (int i = 0; i < parsed.backward_size(); ++i) {
    std::string d = CompareBackward(collected.backward[static_cast<size_t>(i)], parsed.backward(i));
    if (!d.empty()) return d;
  }
  return "";
}

}  // namespace tracetorch::protocol::testing

#endif  // TRACETORCH_PROTOCOL_TESTING_DECODER_ORACLE_H_
