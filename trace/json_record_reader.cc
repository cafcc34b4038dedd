#include "trace/json_record_reader.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "simdjson.h"
#include "trace/json_element_reader.h"
#include "trace/json_fields.h"
#include "trace/json_scanner.h"
#include "trace/json_writer.h"
#include "trace/op_graph.h"
#include "trace/op_graph_json.h"
#include "trace/record.h"

namespace tracetorch {
namespace json_internal {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

class Reader : public ElementReader {
 public:
  explicit Reader(bool rewritten) : ElementReader(rewritten) {}

  absl::Status ReadTensorAt(element e, std::string_view where, TensorInfo* t) const {
    const Path root;
    const Path path{&root, where};
    return ReadTensor(e, path, t);
  }

  absl::Status ReadRecord(element root, TraceRecord* out) {
    const Path path;
    object obj;
    if (root.get(obj) != simdjson::SUCCESS) return ShapeError(path, "expected an object");
    bool have_layers = false;
    for (const auto field : obj) {
      const Path sub{&path, field.key};
      if (field.key == "metadata") {
        if (auto s = ReadMetadata(field.value, sub, &out->metadata); !s.ok()) return s;
      } else if (field.key == "layers") {
        have_layers = true;
        if (auto s = ReadLayers(field.value, sub, &out->layers); !s.ok()) return s;
      } else if (field.key == "warnings") {
        if (auto s = ReadWarnings(field.value, sub, &out->warnings); !s.ok()) return s;
      } else if (field.key == "op_graph") {
        if (auto s = ReadOpGraph(field.value, sub, &out->op_graph); !s.ok()) return s;
      }
    }
    if (!have_layers) return ShapeError(Path{&path, "layers"}, "missing");
    return absl::OkStatus();
  }

 private:
  // ---- Structures.

  absl::Status ReadMetadata(element e, const Path& path, TraceMetadata* m) const {
    if (e.is_null()) return absl::OkStatus();
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    int guess = 0;
    for (const auto field : obj) {
      const Path sub{&path, field.key};
      const int id = FindField(kMetadataFields, field.key, guess);
      guess = id + 1;
      absl::Status s;
      switch (id) {
        case kModelName:
          s = ReadMetadataString(field.value, sub, &m->model_name);
          break;
        case kPytorchVersion:
          s = ReadMetadataString(field.value, sub, &m->pytorch_version);
          break;
        case kPythonVersion:
          s = ReadMetadataString(field.value, sub, &m->python_version);
          break;
        case kPlatform:
          s = ReadMetadataString(field.value, sub, &m->platform);
          break;
        case kCudaAvailable:
          s = ReadBool(field.value, sub, &m->cuda_available);
          break;
        case kCudaVersion:
          s = ReadMetadataString(field.value, sub, &m->cuda_version);
          break;
        case kActiveDevice:
          s = ReadMetadataString(field.value, sub, &m->active_device);
          break;
        case kTotalTimeMs:
          s = ReadOptDouble(field.value, sub, &m->total_time_ms);
          break;
        case kNanOrigin:
          s = ReadNanOrigin(field.value, sub, &m->nan_origin);
          break;
        default: {
          std::string text;
          JsonWriter w(0, &text);
          WriteElement(field.value, w);
          w.Finish();
          m->extra.emplace_back(std::string(field.key), std::move(text));
          break;
        }
      }
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Python writes None for versions it could not find; keep the default then.
  absl::Status ReadMetadataString(element e, const Path& path, std::string* out) const {
    if (e.is_null()) return absl::OkStatus();
    return ReadString(e, path, out);
  }

  absl::Status ReadNanOrigin(element e, const Path& path, std::optional<NanOrigin>* out) const {
    if (e.is_null()) {
      out->reset();
      return absl::OkStatus();
    }
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    NanOrigin origin;
    bool have_layer = false;
    for (const auto field : obj) {
      const Path sub{&path, field.key};
      absl::Status s;
      if (field.key == "layer") {
        have_layer = true;
        s = ReadString(field.value, sub, &origin.layer);
      } else if (field.key == "step") {
        s = ReadInt(field.value, sub, &origin.step);
      } else if (field.key == "kind") {
        std::string kind;
        s = ReadString(field.value, sub, &kind);
        if (s.ok()) {
          if (kind == "nan") {
            origin.is_nan = true;
          } else if (kind == "inf") {
            origin.is_nan = false;
          } else {
            s = ShapeError(sub, "expected \"nan\" or \"inf\"");
          }
        }
      } else if (field.key == "pass") {
        std::string pass;
        s = ReadString(field.value, sub, &pass);
        if (s.ok()) {
          if (pass == "backward") {
            origin.backward = true;
          } else if (pass == "forward") {
            origin.backward = false;
          } else {
            s = ShapeError(sub, "expected \"forward\" or \"backward\"");
          }
        }
      } else if (field.key == "op") {
        s = ReadString(field.value, sub, &origin.op);
      } else if (field.key == "op_func") {
        s = ReadString(field.value, sub, &origin.op_func);
      } else if (field.key == "op_module") {
        s = ReadString(field.value, sub, &origin.op_module);
      }
      if (!s.ok()) return s;
    }
    if (!have_layer) return ShapeError(Path{&path, "layer"}, "missing");
    *out = std::move(origin);
    return absl::OkStatus();
  }

  // The record's "op_graph" member (null: none): an op graph document (trace/op_graph_json.h).
  absl::Status ReadOpGraph(element e, const Path& path, std::shared_ptr<const OpGraph>* out) const {
    out->reset();
    if (e.is_null()) return absl::OkStatus();
    std::string text;
    JsonWriter w(0, &text);
    WriteElement(e, w);
    w.Finish();
    absl::StatusOr<OpGraph> graph = ParseOpGraphJson(text);
    if (!graph.ok()) return ShapeError(path, std::string(graph.status().message()));
    *out = std::make_shared<const OpGraph>(*std::move(graph));
    return absl::OkStatus();
  }

  // Re-serialises a DOM value (an unknown metadata key) as minified JSON in our own layout.
  void WriteElement(element e, JsonWriter& w) const {
    switch (e.type()) {
      case element_type::ARRAY:
        w.BeginArray();
        for (element child : array(e.get_array().value_unsafe())) WriteElement(child, w);
        w.EndArray();
        break;
      case element_type::OBJECT:
        w.BeginObject();
        for (const auto field : object(e.get_object().value_unsafe())) {
          w.Key(field.key);
          WriteElement(field.value, w);
        }
        w.EndObject();
        break;
      case element_type::INT64:
        w.Int(e.get_int64().value_unsafe());
        break;
      case element_type::UINT64:
        w.UInt(e.get_uint64().value_unsafe());
        break;
      case element_type::DOUBLE:
        w.Double(e.get_double().value_unsafe());
        break;
      case element_type::STRING: {
        double v;
        if (Sentinel(e, &v)) {
          w.Null();  // Strict output: non-finite numbers become null.
        } else {
          w.String(e.get_string().value_unsafe());
        }
        break;
      }
      case element_type::BOOL:
        w.Bool(e.get_bool().value_unsafe());
        break;
      case element_type::NULL_VALUE:
        w.Null();
        break;
    }
  }

  // Reads the array `e` element by element with `read_one` into `out`; errors name the index.
  template <typename T>
  absl::Status ReadArrayOf(element e, const Path& path,
                           absl::Status (Reader::*read_one)(element, const Path&, T*) const,
                           std::vector<T>* out) const {
    array arr;
    if (auto s = GetArray(e, path, &arr); !s.ok()) return s;
    out->reserve(arr.size());
    int64_t i = 0;
    for (element child : arr) {
      const Path sub{&path, {}, i++};
      out->emplace_back();
      if (auto s = (this->*read_one)(child, sub, &out->back()); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status ReadLayers(element e, const Path& path, std::vector<LayerTrace>* out) const {
    return ReadArrayOf(e, path, &Reader::ReadLayer, out);
  }

  absl::Status ReadLayer(element e, const Path& path, LayerTrace* l) const {
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    uint64_t seen = 0;
    int guess = 0;
    for (const auto field : obj) {
      const int id = FindField(kLayerFields, field.key, guess);
      if (id < 0) {
        if (field.key == kInfInMasksOnlyKey) {
          if (auto s =
                  ReadBool(field.value, Path{&path, kInfInMasksOnlyKey}, &l->inf_in_masks_only);
              !s.ok()) {
            return s;
          }
        }
        continue;  // Unknown layer keys are ignored.
      }
      guess = id + 1;
      seen |= uint64_t{1} << id;
      const Path sub{&path, kLayerFields[id]};
      const element v = field.value;
      absl::Status s;
      switch (static_cast<LayerField>(id)) {
        case kName:
          s = ReadString(v, sub, &l->name);
          break;
        case kType:
          s = ReadString(v, sub, &l->type);
          break;
        case kFullName:
          s = ReadString(v, sub, &l->full_name);
          break;
        case kDepth:
          s = ReadInt32(v, sub, &l->depth);
          break;
        case kParams:
          s = ReadInt(v, sub, &l->params);
          break;
        case kInputs:
          s = ReadTensors(v, sub, &l->inputs);
          break;
        case kOutputs:
          s = ReadTensors(v, sub, &l->outputs);
          break;
        case kLatency:
          s = ReadOptDouble(v, sub, &l->latency_ms);
          break;
        case kLatencyMin:
          s = ReadOptDouble(v, sub, &l->latency_ms_min);
          break;
        case kLatencyMax:
          s = ReadOptDouble(v, sub, &l->latency_ms_max);
          break;
        case kLatencyMean:
          s = ReadOptDouble(v, sub, &l->latency_ms_mean);
          break;
        case kForwardCount:
          s = ReadInt(v, sub, &l->forward_count);
          break;
        case kHasNan:
          s = ReadBool(v, sub, &l->has_nan);
          break;
        case kHasInf:
          s = ReadBool(v, sub, &l->has_inf);
          break;
        case kGradNorm:
          s = ReadOptDouble(v, sub, &l->grad_norm);
          break;
        case kGradMean:
          s = ReadOptDouble(v, sub, &l->grad_mean);
          break;
        case kGradHasNan:
          s = ReadBool(v, sub, &l->grad_has_nan);
          break;
        case kHasZeroGrad:
          s = ReadBool(v, sub, &l->has_zero_grad);
          break;
        case kGradInNorm:
          s = ReadOptDouble(v, sub, &l->grad_in_norm);
          break;
        case kGradInMean:
          s = ReadOptDouble(v, sub, &l->grad_in_mean);
          break;
        case kGradInHasNan:
          s = ReadBool(v, sub, &l->grad_in_has_nan);
          break;
        case kBwdLatency:
          s = ReadOptDouble(v, sub, &l->bwd_latency_ms);
          break;
        case kBwdLatencyMin:
          s = ReadOptDouble(v, sub, &l->bwd_latency_ms_min);
          break;
        case kBwdLatencyMax:
          s = ReadOptDouble(v, sub, &l->bwd_latency_ms_max);
          break;
        case kBwdLatencyMean:
          s = ReadOptDouble(v, sub, &l->bwd_latency_ms_mean);
          break;
        case kBackwardCount:
          s = ReadInt(v, sub, &l->backward_count);
          break;
        case kFwdMemAlloc:
          s = ReadOptInt(v, sub, &l->fwd_mem_alloc_delta);
          break;
        case kFwdMemReserved:
          s = ReadOptInt(v, sub, &l->fwd_mem_reserved_delta);
          break;
        case kBwdMemAlloc:
          s = ReadOptInt(v, sub, &l->bwd_mem_alloc_delta);
          break;
        case kBwdMemReserved:
          s = ReadOptInt(v, sub, &l->bwd_mem_reserved_delta);
          break;
        case kNumLayerFields:
          break;
      }
      if (!s.ok()) return s;
    }

    const auto has = [seen](LayerField f) { return (seen & (uint64_t{1} << f)) != 0; };
    if (!has(kName)) return ShapeError(Path{&path, kLayerFields[kName]}, "missing");
    if (!has(kType)) return ShapeError(Path{&path, kLayerFields[kType]}, "missing");
    // Defaults for files written before the aggregation fields existed.
    if (!has(kFullName)) l->full_name = l->name;
    // A zero latency without a call is the library's "never ran" (json_record_writer.cc).
    const auto ran = [](const std::optional<double>& latency) {
      return latency.has_value() && *latency != 0.0;
    };
    if (!has(kForwardCount)) l->forward_count = ran(l->latency_ms) ? 1 : 0;
    if (l->forward_count == 0 && l->latency_ms == 0.0) l->latency_ms.reset();
    if (!has(kBackwardCount)) l->backward_count = ran(l->bwd_latency_ms) ? 1 : 0;
    if (l->backward_count == 0 && l->bwd_latency_ms == 0.0) l->bwd_latency_ms.reset();
    if (!has(kLatencyMin)) l->latency_ms_min = l->latency_ms;
    if (!has(kLatencyMax)) l->latency_ms_max = l->latency_ms;
    if (!has(kLatencyMean)) l->latency_ms_mean = l->latency_ms;
    if (!has(kBwdLatencyMin)) l->bwd_latency_ms_min = l->bwd_latency_ms;
    if (!has(kBwdLatencyMax)) l->bwd_latency_ms_max = l->bwd_latency_ms;
    if (!has(kBwdLatencyMean)) l->bwd_latency_ms_mean = l->bwd_latency_ms;
    return absl::OkStatus();
  }

  absl::Status ReadTensors(element e, const Path& path, std::vector<TensorInfo>* out) const {
    if (e.is_null()) return absl::OkStatus();
    return ReadArrayOf(e, path, &Reader::ReadTensor, out);
  }

  absl::Status ReadTensor(element e, const Path& path, TensorInfo* t) const {
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    bool have_shape = false;
    TensorStats stats;
    bool have_stats = false;
    std::optional<NonFiniteCounts> nonfinite;
    int guess = 0;
    for (const auto field : obj) {
      const int id = FindField(kTensorFields, field.key, guess);
      if (id < 0) continue;
      guess = id + 1;
      const Path sub{&path, kTensorFields[id]};
      const element v = field.value;
      absl::Status s;
      switch (static_cast<TensorField>(id)) {
        case kShape: {
          have_shape = true;
          array dims;
          if (v.get(dims) != simdjson::SUCCESS) {
            return ShapeError(sub, "expected an array of integers");
          }
          t->shape.reserve(dims.size());
          for (element d : dims) {
            int64_t n;
            if (d.get(n) != simdjson::SUCCESS) {
              return ShapeError(sub, "expected an array of integers");
            }
            t->shape.push_back(n);
          }
          break;
        }
        case kDtype:
          s = ReadString(v, sub, &t->dtype);
          break;
        case kDevice:
          s = ReadString(v, sub, &t->device);
          break;
        case kMean:
          have_stats = true;
          s = ReadOptDouble(v, sub, &stats.mean);
          break;
        case kStd:
          have_stats = true;
          s = ReadOptDouble(v, sub, &stats.std);
          break;
        case kMin:
          have_stats = true;
          s = ReadOptDouble(v, sub, &stats.min);
          break;
        case kMax:
          have_stats = true;
          s = ReadOptDouble(v, sub, &stats.max);
          break;
        case kNanCount:
          have_stats = true;
          s = ReadInt(v, sub, &stats.nan_count);
          break;
        case kInfCount:
          have_stats = true;
          s = ReadInt(v, sub, &stats.inf_count);
          break;
        case kNegInfCount:
          s = ReadInt(v, sub, &stats.neg_inf_count);
          break;
        case kFiniteAllZero:
          s = ReadBool(v, sub, &stats.finite_all_zero);
          break;
        case kNonFinite:
          s = ReadNonFinite(v, sub, &nonfinite);
          break;
        case kNumTensorFields:
          break;
      }
      if (!s.ok()) return s;
    }
    if (!have_shape) return ShapeError(Path{&path, kTensorFields[kShape]}, "missing");
    if (have_stats) {
      t->stats = stats;  // The statistics hold the counts; a "nonfinite" beside them is redundant.
    } else {
      t->nonfinite = nonfinite;
    }
    return absl::OkStatus();
  }

  absl::Status ReadNonFinite(element e, const Path& path,
                             std::optional<NonFiniteCounts>* out) const {
    if (e.is_null()) return absl::OkStatus();
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    NonFiniteCounts counts;
    for (const auto field : obj) {
      const Path sub{&path, field.key};
      absl::Status s;
      if (field.key == kTensorFields[kNanCount]) {
        s = ReadInt(field.value, sub, &counts.nan_count);
      } else if (field.key == kTensorFields[kInfCount]) {
        s = ReadInt(field.value, sub, &counts.inf_count);
      } else if (field.key == kTensorFields[kNegInfCount]) {
        s = ReadInt(field.value, sub, &counts.neg_inf_count);
      } else if (field.key == kTensorFields[kFiniteAllZero]) {
        s = ReadBool(field.value, sub, &counts.finite_all_zero);
      }
      if (!s.ok()) return s;
    }
    *out = counts;
    return absl::OkStatus();
  }

  absl::Status ReadWarnings(element e, const Path& path, std::vector<Anomaly>* out) const {
    if (e.is_null()) return absl::OkStatus();
    return ReadArrayOf(e, path, &Reader::ReadAnomaly, out);
  }

  absl::Status ReadAnomaly(element e, const Path& path, Anomaly* a) const {
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    bool have_type = false;
    bool have_severity = false;
    for (const auto field : obj) {
      const Path sub{&path, field.key};
      absl::Status s;
      std::string text;
      if (field.key == "type") {
        have_type = true;
        s = ReadString(field.value, sub, &text);
        if (s.ok() && !ParseAnomalyType(text, &a->type)) {
          // Another tool's or a newer version's check: kept as it is (UnknownAnomalyTypes()).
          a->type = AnomalyType::kUnknown;
          a->unknown_type = std::move(text);
        }
      } else if (field.key == "severity") {
        have_severity = true;
        s = ReadString(field.value, sub, &text);
        if (s.ok() && !ParseAnomalySeverity(text, &a->severity)) {
          s = ShapeError(sub, absl::StrCat("unknown severity \"", text, "\""));
        }
      } else if (field.key == "layer") {
        s = ReadString(field.value, sub, &a->layer);
      } else if (field.key == "message") {
        s = ReadString(field.value, sub, &a->message);
      } else if (field.key == "details") {
        s = ReadDetails(field.value, sub, &a->details);
      }
      if (!s.ok()) return s;
    }
    if (!have_type) return ShapeError(Path{&path, "type"}, "missing");
    if (!have_severity) return ShapeError(Path{&path, "severity"}, "missing");
    return absl::OkStatus();
  }

  absl::Status ReadDetails(element e, const Path& path, Details* out) const {
    if (e.is_null()) return absl::OkStatus();
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    for (const auto field : obj) {
      const Path sub{&path, field.key};
      DetailValue value;
      const element v = field.value;
      switch (v.type()) {
        case element_type::NULL_VALUE:
          break;
        case element_type::BOOL:
          value = v.get_bool().value_unsafe();
          break;
        case element_type::INT64:
          value = v.get_int64().value_unsafe();
          break;
        case element_type::UINT64:
          value = static_cast<double>(v.get_uint64().value_unsafe());
          break;
        case element_type::DOUBLE:
          value = v.get_double().value_unsafe();
          break;
        case element_type::STRING: {
          double d;
          if (Sentinel(v, &d)) {
            value = d;
          } else {
            value = std::string(v.get_string().value_unsafe());
          }
          break;
        }
        case element_type::ARRAY: {
          std::vector<std::string> strings;
          for (element item : array(v.get_array().value_unsafe())) {
            std::string_view s;
            double ignored;
            if (item.get(s) != simdjson::SUCCESS || Sentinel(item, &ignored)) {
              return ShapeError(sub, "expected an array of strings");
            }
            strings.emplace_back(s);
          }
          value = std::move(strings);
          break;
        }
        case element_type::OBJECT:
          return ShapeError(sub,
                            "expected null, a boolean, a number, a string or an array of strings");
      }
      out->emplace_back(std::string(field.key), std::move(value));
    }
    return absl::OkStatus();
  }
};

}  // namespace

absl::Status ReadTensorElement(simdjson::dom::element e, bool rewritten, std::string_view where,
                               TensorInfo* out) {
  return Reader(rewritten).ReadTensorAt(e, where, out);
}

absl::Status ReadRecordDocument(simdjson::dom::element root, bool rewritten, TraceRecord* out) {
  return Reader(rewritten).ReadRecord(root, out);
}

}  // namespace json_internal
}  // namespace tracetorch
