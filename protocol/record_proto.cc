#include "protocol/record_proto.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trace/op_graph.h"
#include "trace/op_graph_json.h"

namespace tracetorch {
namespace {

void StatsToProto(const TensorStats& s, v1::TensorStats* out) {
  if (s.mean) out->set_mean(*s.mean);
  if (s.std) out->set_std(*s.std);
  if (s.min) out->set_min(*s.min);
  if (s.max) out->set_max(*s.max);
  out->set_nan_count(s.nan_count);
  out->set_inf_count(s.inf_count);
  out->set_neg_inf_count(s.neg_inf_count);
  out->set_finite_all_zero(s.finite_all_zero);
}

void TensorToProto(const TensorInfo& t, v1::TensorInfo* out) {
  out->mutable_shape()->Add(t.shape.begin(), t.shape.end());
  out->set_dtype(t.dtype);
  out->set_device(t.device);
  if (t.stats) StatsToProto(*t.stats, out->mutable_stats());
  if (t.nonfinite) {
    out->mutable_nonfinite()->set_nan_count(t.nonfinite->nan_count);
    out->mutable_nonfinite()->set_inf_count(t.nonfinite->inf_count);
    out->mutable_nonfinite()->set_neg_inf_count(t.nonfinite->neg_inf_count);
    out->mutable_nonfinite()->set_finite_all_zero(t.nonfinite->finite_all_zero);
  }
}

TensorInfo TensorFromProto(const v1::TensorInfo& t) {
  TensorInfo out;
  out.shape.assign(t.shape().begin(), t.shape().end());
  out.dtype = t.dtype();
  out.device = t.device();
  if (t.has_stats()) out.stats = FromProto(t.stats());
  if (t.has_nonfinite()) {
    out.nonfinite = NonFiniteCounts{.nan_count = t.nonfinite().nan_count(),
                                    .inf_count = t.nonfinite().inf_count(),
                                    .neg_inf_count = t.nonfinite().neg_inf_count(),
                                    .finite_all_zero = t.nonfinite().finite_all_zero()};
  }
  return out;
}

void DetailToProto(const DetailValue& v, v1::DetailValue* out) {
  if (std::holds_alternative<std::monostate>(v)) {
    out->set_null_value(true);
  } else if (const bool* b = std::get_if<bool>(&v)) {
    out->set_bool_value(*b);
  } else if (const int64_t* i = std::get_if<int64_t>(&v)) {
    out->set_int_value(*i);
  } else if (const double* d = std::get_if<double>(&v)) {
    out->set_double_value(*d);
  } else if (const std::string* s = std::get_if<std::string>(&v)) {
    out->set_string_value(*s);
  } else if (const auto* list = std::get_if<std::vector<std::string>>(&v)) {
    auto* values = out->mutable_string_list()->mutable_values();
    for (const std::string& s : *list) values->Add(std::string(s));
  }
}

DetailValue DetailFromProto(const v1::DetailValue& v) {
  switch (v.kind_case()) {
    case v1::DetailValue::kBoolValue:
      return v.bool_value();
    case v1::DetailValue::kIntValue:
      return v.int_value();
    case v1::DetailValue::kDoubleValue:
      return v.double_value();
    case v1::DetailValue::kStringValue:
      return v.string_value();
    case v1::DetailValue::kStringList:
      return std::vector<std::string>(v.string_list().values().begin(),
                                      v.string_list().values().end());
    case v1::DetailValue::kNullValue:
    case v1::DetailValue::KIND_NOT_SET:
      break;
  }
  return std::monostate();
}

v1::Severity SeverityToProto(AnomalySeverity s) {
  switch (s) {
    case AnomalySeverity::kInfo:
      return v1::SEVERITY_INFO;
    case AnomalySeverity::kWarning:
      return v1::SEVERITY_WARNING;
    case AnomalySeverity::kCritical:
      return v1::SEVERITY_CRITICAL;
  }
  return v1::SEVERITY_UNSPECIFIED;
}

AnomalySeverity SeverityFromProto(v1::Severity s) {
  switch (s) {
    case v1::SEVERITY_WARNING:
      return AnomalySeverity::kWarning;
    case v1::SEVERITY_CRITICAL:
      return AnomalySeverity::kCritical;
    default:
      return AnomalySeverity::kInfo;
  }
}

}  // namespace

void ToProto(const NanOrigin& origin, v1::NanOrigin* out) {
  out->set_layer(origin.layer);
  out->set_step(origin.step);
  out->set_is_nan(origin.is_nan);
  out->set_op(origin.op);
  out->set_op_func(origin.op_func);
  out->set_op_module(origin.op_module);
  out->set_backward(origin.backward);
}

NanOrigin FromProto(const v1::NanOrigin& origin) {
  NanOrigin out;
  out.layer = origin.layer();
  out.step = origin.step();
  out.is_nan = origin.is_nan();
  out.op = origin.op();
  out.op_func = origin.op_func();
  out.op_module = origin.op_module();
  out.backward = origin.backward();
  return out;
}

void ToProto(const TraceMetadata& m, v1::TraceMetadata* out) {
  out->set_model_name(m.model_name);
  out->set_pytorch_version(m.pytorch_version);
  out->set_python_version(m.python_version);
  out->set_platform(m.platform);
  out->set_cuda_available(m.cuda_available);
  out->set_cuda_version(m.cuda_version);
  out->set_active_device(m.active_device);
  if (m.total_time_ms) out->set_total_time_ms(*m.total_time_ms);
  if (m.nan_origin) ToProto(*m.nan_origin, out->mutable_nan_origin());
  for (const auto& [key, json] : m.extra) {
    v1::TraceMetadata::ExtraEntry* e = out->add_extra();
    e->set_key(key);
    e->set_json_value(json);
  }
}

TraceMetadata FromProto(const v1::TraceMetadata& m) {
  TraceMetadata out;
  out.model_name = m.model_name();
  out.pytorch_version = m.pytorch_version();
  out.python_version = m.python_version();
  out.platform = m.platform();
  out.cuda_available = m.cuda_available();
  out.cuda_version = m.cuda_version();
  out.active_device = m.active_device();
  if (m.has_total_time_ms()) out.total_time_ms = m.total_time_ms();
  if (m.has_nan_origin()) out.nan_origin = FromProto(m.nan_origin());
  for (const v1::TraceMetadata::ExtraEntry& e : m.extra()) {
    out.extra.emplace_back(e.key(), e.json_value());
  }
  return out;
}

void ToProto(const LayerTrace& l, v1::LayerTrace* out) {
  out->set_name(l.name);
  out->set_type(l.type);
  out->set_full_name(l.full_name);
  out->set_depth(l.depth);
  out->set_params(l.params);
  for (const TensorInfo& t : l.inputs) TensorToProto(t, out->add_inputs());
  for (const TensorInfo& t : l.outputs) TensorToProto(t, out->add_outputs());
  if (l.latency_ms) out->set_latency_ms(*l.latency_ms);
  if (l.latency_ms_min) out->set_latency_ms_min(*l.latency_ms_min);
  if (l.latency_ms_max) out->set_latency_ms_max(*l.latency_ms_max);
  if (l.latency_ms_mean) out->set_latency_ms_mean(*l.latency_ms_mean);
  out->set_forward_count(l.forward_count);
  out->set_has_nan(l.has_nan);
  out->set_has_inf(l.has_inf);
  out->set_inf_in_masks_only(l.inf_in_masks_only);
  if (l.grad_norm) out->set_grad_norm(*l.grad_norm);
  if (l.grad_mean) out->set_grad_mean(*l.grad_mean);
  out->set_grad_has_nan(l.grad_has_nan);
  out->set_has_zero_grad(l.has_zero_grad);
  if (l.grad_in_norm) out->set_grad_in_norm(*l.grad_in_norm);
  if (l.grad_in_mean) out->set_grad_in_mean(*l.grad_in_mean);
  out->set_grad_in_has_nan(l.grad_in_has_nan);
  if (l.bwd_latency_ms) out->set_bwd_latency_ms(*l.bwd_latency_ms);
  if (l.bwd_latency_ms_min) out->set_bwd_latency_ms_min(*l.bwd_latency_ms_min);
  if (l.bwd_latency_ms_max) out->set_bwd_latency_ms_max(*l.bwd_latency_ms_max);
  if (l.bwd_latency_ms_mean) out->set_bwd_latency_ms_mean(*l.bwd_latency_ms_mean);
  out->set_backward_count(l.backward_count);
  if (l.fwd_mem_alloc_delta) out->set_fwd_mem_alloc_delta(*l.fwd_mem_alloc_delta);
  if (l.fwd_mem_reserved_delta) out->set_fwd_mem_reserved_delta(*l.fwd_mem_reserved_delta);
  if (l.bwd_mem_alloc_delta) out->set_bwd_mem_alloc_delta(*l.bwd_mem_alloc_delta);
  if (l.bwd_mem_reserved_delta) out->set_bwd_mem_reserved_delta(*l.bwd_mem_reserved_delta);
}

LayerTrace FromProto(const v1::LayerTrace& l) {
  LayerTrace out;
  out.name = l.name();
  out.type = l.type();
  out.full_name = l.full_name();
  out.depth = l.depth();
  out.params = l.params();
  for (const v1::TensorInfo& t : l.inputs()) out.inputs.push_back(TensorFromProto(t));
  for (const v1::TensorInfo& t : l.outputs()) out.outputs.push_back(TensorFromProto(t));
  if (l.has_latency_ms()) out.latency_ms = l.latency_ms();
  if (l.has_latency_ms_min()) out.latency_ms_min = l.latency_ms_min();
  if (l.has_latency_ms_max()) out.latency_ms_max = l.latency_ms_max();
  if (l.has_latency_ms_mean()) out.latency_ms_mean = l.latency_ms_mean();
  out.forward_count = l.forward_count();
  out.has_nan = l.has_nan();
  out.has_inf = l.has_inf();
  out.inf_in_masks_only = l.inf_in_masks_only();
  if (l.has_grad_norm()) out.grad_norm = l.grad_norm();
  if (l.has_grad_mean()) out.grad_mean = l.grad_mean();
  out.grad_has_nan = l.grad_has_nan();
  out.has_zero_grad = l.has_zero_grad();
  if (l.has_grad_in_norm()) out.grad_in_norm = l.grad_in_norm();
  if (l.has_grad_in_mean()) out.grad_in_mean = l.grad_in_mean();
  out.grad_in_has_nan = l.grad_in_has_nan();
  if (l.has_bwd_latency_ms()) out.bwd_latency_ms = l.bwd_latency_ms();
  if (l.has_bwd_latency_ms_min()) out.bwd_latency_ms_min = l.bwd_latency_ms_min();
  if (l.has_bwd_latency_ms_max()) out.bwd_latency_ms_max = l.bwd_latency_ms_max();
  if (l.has_bwd_latency_ms_mean()) out.bwd_latency_ms_mean = l.bwd_latency_ms_mean();
  out.backward_count = l.backward_count();
  if (l.has_fwd_mem_alloc_delta()) out.fwd_mem_alloc_delta = l.fwd_mem_alloc_delta();
  if (l.has_fwd_mem_reserved_delta()) out.fwd_mem_reserved_delta = l.fwd_mem_reserved_delta();
  if (l.has_bwd_mem_alloc_delta()) out.bwd_mem_alloc_delta = l.bwd_mem_alloc_delta();
  if (l.has_bwd_mem_reserved_delta()) out.bwd_mem_reserved_delta = l.bwd_mem_reserved_delta();
  return out;
}

void ToProto(const Anomaly& a, v1::Anomaly* out) {
  if (a.type == AnomalyType::kUnknown) {
    out->set_type(v1::ANOMALY_TYPE_UNSPECIFIED);
    out->set_unknown_type(a.unknown_type);
  } else {
    out->set_type(static_cast<v1::AnomalyType>(static_cast<int>(a.type) + 1));
  }
  out->set_severity(SeverityToProto(a.severity));
  out->set_layer(a.layer);
  out->set_message(a.message);
  for (const auto& [key, value] : a.details) {
    v1::Detail* d = out->add_details();
    d->set_key(key);
    DetailToProto(value, d->mutable_value());
  }
}

Anomaly FromProto(const v1::Anomaly& a) {
  Anomaly out;
  const int type = static_cast<int>(a.type()) - 1;
  if (type >= 0 && type <= static_cast<int>(AnomalyType::kRankDivergence)) {
    out.type = static_cast<AnomalyType>(type);
  } else {
    // A type the sender did not know (its spelling travels beside it), or a newer enum value.
    out.type = AnomalyType::kUnknown;
    out.unknown_type = a.unknown_type();
  }
  out.severity = SeverityFromProto(a.severity());
  out.layer = a.layer();
  out.message = a.message();
  for (const v1::Detail& d : a.details()) {
    out.details.emplace_back(d.key(), DetailFromProto(d.value()));
  }
  return out;
}

void ToProto(const TraceRecord& record, v1::TraceRecord* out) {
  ToProto(record.metadata, out->mutable_metadata());
  for (const LayerTrace& l : record.layers) ToProto(l, out->add_layers());
  for (const Anomaly& a : record.warnings) ToProto(a, out->add_warnings());
  if (record.op_graph != nullptr) out->set_op_graph_json(OpGraphToJson(*record.op_graph, 0));
}

TraceRecord FromProto(const v1::TraceRecord& record) {
  TraceRecord out;
  out.metadata = FromProto(record.metadata());
  out.layers.reserve(static_cast<size_t>(record.layers_size()));
  for (const v1::LayerTrace& l : record.layers()) out.layers.push_back(FromProto(l));
  for (const v1::Anomaly& a : record.warnings()) out.warnings.push_back(FromProto(a));
  if (!record.op_graph_json().empty()) {
    if (absl::StatusOr<OpGraph> g = ParseOpGraphJson(record.op_graph_json()); g.ok()) {
      out.op_graph = std::make_shared<const OpGraph>(*std::move(g));
    }
  }
  return out;
}

void ToProto(const TraceDiff& diff, v1::TraceDiff* out) {
  out->set_baseline_model(diff.baseline_model);
  out->set_current_model(diff.current_model);
  for (const DiffEntry& e : diff.entries) {
    v1::DiffEntry* p = out->add_entries();
    switch (e.severity) {
      case DiffSeverity::kInfo:
        p->set_severity(v1::SEVERITY_INFO);
        break;
      case DiffSeverity::kWarning:
        p->set_severity(v1::SEVERITY_WARNING);
        break;
      case DiffSeverity::kCritical:
        p->set_severity(v1::SEVERITY_CRITICAL);
        break;
    }
    p->set_kind(static_cast<v1::DiffKind>(static_cast<int>(e.kind) + 1));
    p->set_layer(e.layer);
    p->set_message(e.message);
    for (const auto& [key, value] : e.details) {
      v1::Detail* d = p->add_details();
      d->set_key(key);
      DetailToProto(value, d->mutable_value());
    }
  }
  out->set_has_regressions(diff.has_regressions());
  out->set_critical_count(diff.critical_count());
  out->set_warning_count(diff.warning_count());
}

TraceDiff FromProto(const v1::TraceDiff& diff) {
  TraceDiff out;
  out.baseline_model = diff.baseline_model();
  out.current_model = diff.current_model();
  out.entries.reserve(static_cast<size_t>(diff.entries_size()));
  for (const v1::DiffEntry& p : diff.entries()) {
    DiffEntry e;
    switch (p.severity()) {
      case v1::SEVERITY_WARNING:
        e.severity = DiffSeverity::kWarning;
        break;
      case v1::SEVERITY_CRITICAL:
        e.severity = DiffSeverity::kCritical;
        break;
      default:
        e.severity = DiffSeverity::kInfo;
        break;
    }
    const int kind = static_cast<int>(p.kind()) - 1;
    e.kind = kind >= 0 && kind <= static_cast<int>(DiffKind::kResolvedAnomaly)
                 ? static_cast<DiffKind>(kind)
                 : DiffKind::kLayerAdded;
    e.layer = p.layer();
    e.message = p.message();
    for (const v1::Detail& d : p.details()) {
      e.details.emplace_back(d.key(), DetailFromProto(d.value()));
    }
    out.entries.push_back(std::move(e));
  }
  return out;
}

LatencySamples LatencySamplesFromHistory(
    const google::protobuf::RepeatedPtrField<v1::LayerHistory>& history) {
  LatencySamples out;
  for (const v1::LayerHistory& h : history) {
    std::vector<double>& values = out.by_layer[h.full_name()];
    for (double v : h.latency_ms()) {
      if (!std::isnan(v)) values.push_back(v);
    }
  }
  return out;
}

StepHistory StepHistoryFromProto(
    const google::protobuf::RepeatedPtrField<v1::LayerHistory>& history) {
  StepHistory out;
  out.layers.reserve(static_cast<size_t>(history.size()));
  for (const v1::LayerHistory& h : history) {
    LayerSteps& l = out.layers.emplace_back();
    l.full_name = h.full_name();
    l.steps.assign(h.steps().begin(), h.steps().end());
    l.latency_ms.assign(h.latency_ms().begin(), h.latency_ms().end());
    l.output_std.assign(h.output_std().begin(), h.output_std().end());
    l.grad_norm.assign(h.grad_norm().begin(), h.grad_norm().end());
    l.non_finite.assign(h.non_finite().begin(), h.non_finite().end());
  }
  return out;
}

TensorStats FromProto(const v1::TensorStats& s) {
  TensorStats out;
  if (s.has_mean()) out.mean = s.mean();
  if (s.has_std()) out.std = s.std();
  if (s.has_min()) out.min = s.min();
  if (s.has_max()) out.max = s.max();
  out.nan_count = s.nan_count();
  out.inf_count = s.inf_count();
  out.neg_inf_count = s.neg_inf_count();
  out.finite_all_zero = s.finite_all_zero();
  return out;
}

}  // namespace tracetorch
