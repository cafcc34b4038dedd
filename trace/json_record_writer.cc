#include "trace/json_record_writer.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "trace/diff.h"
#include "trace/json_fields.h"
#include "trace/json_writer.h"
#include "trace/op_graph_json.h"
#include "trace/record.h"

namespace tracetorch {
namespace json_internal {
namespace {

void WriteDetails(const Details& details, JsonWriter& w) {
  w.BeginObject();
  for (const auto& [key, value] : details) {
    w.Key(key);
    std::visit(
        [&w](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::monostate>) {
            w.Null();
          } else if constexpr (std::is_same_v<T, bool>) {
            w.Bool(v);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            w.Int(v);
          } else if constexpr (std::is_same_v<T, double>) {
            w.Double(v);
          } else if constexpr (std::is_same_v<T, std::string>) {
            w.String(v);
          } else {
            w.BeginArray();
            for (const std::string& s : v) w.String(s);
            w.EndArray();
          }
        },
        value);
  }
  w.EndObject();
}

// The facts a mask is told by (trace/nonfinite.h), only when they say something: a file of a
// healthy run is byte for byte what it was.
void WriteMaskFacts(int64_t neg_inf_count, bool finite_all_zero, JsonWriter& w) {
  if (neg_inf_count > 0) {
    w.PlainKey(kTensorFields[kNegInfCount]);
    w.Int(neg_inf_count);
  }
  if (finite_all_zero) {
    w.PlainKey(kTensorFields[kFiniteAllZero]);
    w.Bool(true);
  }
}

}  // namespace

void WriteTensor(const TensorInfo& t, JsonWriter& w) {
  w.BeginObject();
  w.PlainKey(kTensorFields[kShape]);
  w.BeginArray();
  for (int64_t d : t.shape) w.Int(d);
  w.EndArray();
  w.PlainKey(kTensorFields[kDtype]);
  w.String(t.dtype);
  w.PlainKey(kTensorFields[kDevice]);
  w.String(t.device);
  if (t.stats) {
    w.PlainKey(kTensorFields[kMean]);
    w.OptDouble(t.stats->mean);
    w.PlainKey(kTensorFields[kStd]);
    w.OptDouble(t.stats->std);
    w.PlainKey(kTensorFields[kMin]);
    w.OptDouble(t.stats->min);
    w.PlainKey(kTensorFields[kMax]);
    w.OptDouble(t.stats->max);
    w.PlainKey(kTensorFields[kNanCount]);
    w.Int(t.stats->nan_count);
    w.PlainKey(kTensorFields[kInfCount]);
    w.Int(t.stats->inf_count);
    WriteMaskFacts(t.stats->neg_inf_count, t.stats->finite_all_zero, w);
  } else if (t.nonfinite) {
    w.PlainKey(kTensorFields[kNonFinite]);
    w.BeginObject();
    w.PlainKey(kTensorFields[kNanCount]);
    w.Int(t.nonfinite->nan_count);
    w.PlainKey(kTensorFields[kInfCount]);
    w.Int(t.nonfinite->inf_count);
    WriteMaskFacts(t.nonfinite->neg_inf_count, t.nonfinite->finite_all_zero, w);
    w.EndObject();
  }
  w.EndObject();
}

namespace {

// The library writes 0.0 for the latency of a layer that never ran that pass (a fresh layer, a
// forward without backward) and its own tools compare it with 0; so do we, for such a layer only.
// The reader turns it back into "not measured".
void WriteLatest(const std::optional<double>& latency, int64_t count, JsonWriter& w) {
  if (!latency.has_value() && count == 0) {
    w.Double(0.0);
  } else {
    w.OptDouble(latency);
  }
}

void WriteLayer(const LayerTrace& l, JsonWriter& w) {
  const auto key = [&w](LayerField f) { w.PlainKey(kLayerFields[f]); };
  w.BeginObject();
  key(kName);
  w.String(l.name);
  key(kType);
  w.String(l.type);
  key(kFullName);
  w.String(l.full_name);
  key(kDepth);
  w.Int(l.depth);
  key(kParams);
  w.Int(l.params);
  key(kInputs);
  w.BeginArray();
  for (const TensorInfo& t : l.inputs) WriteTensor(t, w);
  w.EndArray();
  key(kOutputs);
  w.BeginArray();
  for (const TensorInfo& t : l.outputs) WriteTensor(t, w);
  w.EndArray();
  key(kLatency);
  WriteLatest(l.latency_ms, l.forward_count, w);
  key(kLatencyMin);
  w.OptDouble(l.latency_ms_min);
  key(kLatencyMax);
  w.OptDouble(l.latency_ms_max);
  key(kLatencyMean);
  w.OptDouble(l.latency_ms_mean);
  key(kForwardCount);
  w.Int(l.forward_count);
  key(kHasNan);
  w.Bool(l.has_nan);
  key(kHasInf);
  w.Bool(l.has_inf);
  if (l.inf_in_masks_only) {
    w.PlainKey(kInfInMasksOnlyKey);
    w.Bool(true);
  }
  key(kGradNorm);
  w.OptDouble(l.grad_norm);
  key(kGradMean);
  w.OptDouble(l.grad_mean);
  key(kGradHasNan);
  w.Bool(l.grad_has_nan);
  key(kHasZeroGrad);
  w.Bool(l.has_zero_grad);
  key(kGradInNorm);
  w.OptDouble(l.grad_in_norm);
  key(kGradInMean);
  w.OptDouble(l.grad_in_mean);
  key(kGradInHasNan);
  w.Bool(l.grad_in_has_nan);
  key(kBwdLatency);
  WriteLatest(l.bwd_latency_ms, l.backward_count, w);
  key(kBwdLatencyMin);
  w.OptDouble(l.bwd_latency_ms_min);
  key(kBwdLatencyMax);
  w.OptDouble(l.bwd_latency_ms_max);
  key(kBwdLatencyMean);
  w.OptDouble(l.bwd_latency_ms_mean);
  key(kBackwardCount);
  w.Int(l.backward_count);
  key(kFwdMemAlloc);
  w.OptInt(l.fwd_mem_alloc_delta);
  key(kFwdMemReserved);
  w.OptInt(l.fwd_mem_reserved_delta);
  key(kBwdMemAlloc);
  w.OptInt(l.bwd_mem_alloc_delta);
  key(kBwdMemReserved);
  w.OptInt(l.bwd_mem_reserved_delta);
  w.EndObject();
}

void WriteMetadata(const TraceMetadata& m, JsonWriter& w) {
  const auto key = [&w](MetadataField f) { w.PlainKey(kMetadataFields[f]); };
  w.BeginObject();
  key(kModelName);
  w.String(m.model_name);
  key(kPytorchVersion);
  w.String(m.pytorch_version);
  key(kPythonVersion);
  w.String(m.python_version);
  key(kPlatform);
  w.String(m.platform);
  key(kCudaAvailable);
  w.Bool(m.cuda_available);
  key(kCudaVersion);
  w.String(m.cuda_version);
  key(kActiveDevice);
  w.String(m.active_device);
  key(kTotalTimeMs);
  w.OptDouble(m.total_time_ms);
  if (m.nan_origin) {
    key(kNanOrigin);
    w.BeginObject();
    w.PlainKey("layer");
    w.String(m.nan_origin->layer);
    w.PlainKey("step");
    w.Int(m.nan_origin->step);
    w.PlainKey("kind");
    w.String(m.nan_origin->is_nan ? "nan" : "inf");
    if (m.nan_origin->backward) {
      w.PlainKey("pass");
      w.String("backward");
    }
    if (!m.nan_origin->op.empty()) {
      w.PlainKey("op");
      w.String(m.nan_origin->op);
      w.PlainKey("op_func");
      w.String(m.nan_origin->op_func);
      w.PlainKey("op_module");
      w.String(m.nan_origin->op_module);
    }
    w.EndObject();
  }
  for (const auto& [k, v] : m.extra) {
    w.Key(k);
    w.RawValue(v);
  }
  w.EndObject();
}

// A key of ours and its string value.
struct KeyString {
  std::string_view key;
  std::string_view value;
};

// One finding: an anomaly of a record's warnings ({"type", "severity", ...}) or a diff entry
// ({"severity", "kind", ...}): the two keys that classify it, then layer, message and details.
void WriteFinding(KeyString first, KeyString second, const std::string& layer,
                  const std::string& message, const Details& details, JsonWriter& w) {
  w.BeginObject();
  for (const KeyString& e : {first, second}) {
    w.PlainKey(e.key);
    w.String(e.value);
  }
  w.PlainKey("layer");
  w.String(layer);
  w.PlainKey("message");
  w.String(message);
  w.PlainKey("details");
  WriteDetails(details, w);
  w.EndObject();
}

}  // namespace

void WriteAnomaly(const Anomaly& a, JsonWriter& w) {
  WriteFinding({"type", TypeName(a)}, {"severity", ToString(a.severity)}, a.layer, a.message,
               a.details, w);
}

void WriteRecord(const TraceRecord& record, JsonWriter& w) {
  w.BeginObject();
  w.PlainKey("metadata");
  WriteMetadata(record.metadata, w);
  w.PlainKey("layers");
  w.BeginArray();
  for (const LayerTrace& layer : record.layers) WriteLayer(layer, w);
  w.EndArray();
  w.PlainKey("warnings");
  w.BeginArray();
  for (const Anomaly& a : record.warnings) WriteAnomaly(a, w);
  w.EndArray();
  if (record.op_graph != nullptr) {
    w.PlainKey("op_graph");
    w.RawValue(OpGraphToJson(*record.op_graph, 0));  // Minified whatever the record's indent.
  }
  w.EndObject();
}

void WriteDiff(const TraceDiff& diff, JsonWriter& w) {
  w.BeginObject();
  w.PlainKey("baseline_model");
  w.String(diff.baseline_model);
  w.PlainKey("current_model");
  w.String(diff.current_model);
  w.PlainKey("has_regressions");
  w.Bool(diff.has_regressions());
  w.PlainKey("critical_count");
  w.Int(diff.critical_count());
  w.PlainKey("warning_count");
  w.Int(diff.warning_count());
  w.PlainKey("entries");
  w.BeginArray();
  for (const DiffEntry& e : diff.entries) {
    WriteFinding({"severity", ToString(e.severity)}, {"kind", ToString(e.kind)}, e.layer, e.message,
                 e.details, w);
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace json_internal
}  // namespace tracetorch
