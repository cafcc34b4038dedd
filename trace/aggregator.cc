#include "trace/aggregator.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trace/nonfinite.h"

namespace tracetorch {
namespace {

// Folds one latency measurement into latest/min/max/mean. The mean is over the calls that had one.
void FoldLatency(std::optional<double> sample, std::optional<double>* latest,
                 std::optional<double>* min, std::optional<double>* max,
                 std::optional<double>* mean, double* sum, int64_t* samples) {
  if (!sample.has_value()) {
    // Unmeasured call: it counts as a call, but the latency statistics keep describing the calls
    // that were measured (a record never shows a latency of "unknown" next to a known mean).
    return;
  }
  const double v = *sample;
  *latest = v;
  *min = min->has_value() ? std::min(**min, v) : v;
  *max = max->has_value() ? std::max(**max, v) : v;
  *sum += v;
  ++*samples;
  *mean = *sum / static_cast<double>(*samples);
}

bool AnyOutputHas(const std::vector<TensorInfo>& outputs, int64_t (*count)(const TensorInfo&)) {
  for (const TensorInfo& t : outputs) {
    if (count(t) > 0) return true;
  }
  return false;
}

// Whether every output that holds an Inf is a mask (trace/nonfinite.h).
bool InfInMasksOnly(const std::vector<TensorInfo>& outputs) {
  for (const TensorInfo& t : outputs) {
    if (InfCount(t) > 0 && !IsMask(t)) return false;
  }
  return true;
}

// A call's outputs held an Inf: has_inf is sticky, and the layer's Infs stay "in masks only" while
// every call's were.
void NoteInf(bool in_masks_only, LayerTrace* t) {
  t->inf_in_masks_only = (t->has_inf ? t->inf_in_masks_only : true) && in_masks_only;
  t->has_inf = true;
}

LayerTrace FreshTrace(const LayerTrace& declared) {
  LayerTrace t;
  t.name = declared.name;
  t.type = declared.type;
  t.full_name = declared.full_name;
  t.depth = declared.depth;
  t.params = declared.params;
  return t;
}

}  // namespace

void RecordForwardLatency(double latency_ms, LayerTrace* l) {
  double sum = l->latency_ms_mean.value_or(0.0) * static_cast<double>(l->forward_count);
  FoldLatency(latency_ms, &l->latency_ms, &l->latency_ms_min, &l->latency_ms_max,
              &l->latency_ms_mean, &sum, &l->forward_count);
}

void RecordBackwardLatency(double latency_ms, LayerTrace* l) {
  double sum = l->bwd_latency_ms_mean.value_or(0.0) * static_cast<double>(l->backward_count);
  FoldLatency(latency_ms, &l->bwd_latency_ms, &l->bwd_latency_ms_min, &l->bwd_latency_ms_max,
              &l->bwd_latency_ms_mean, &sum, &l->backward_count);
}

TraceAggregator::TraceAggregator(TraceMetadata metadata) : metadata_(std::move(metadata)) {}

absl::StatusOr<TraceAggregator::LayerId> TraceAggregator::DeclareLayer(const LayerInfo& info) {
  absl::MutexLock lock(&mu_);
  auto it = ids_by_name_.find(info.full_name);
  if (it != ids_by_name_.end()) {
    const LayerTrace& known = layers_[static_cast<size_t>(it->second)].trace;
    if (known.type != info.type) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", info.full_name, "' was declared with type '", known.type,
                       "' and is now declared with type '", info.type, "'"));
    }
    return it->second;
  }
  const auto id = static_cast<LayerId>(layers_.size());
  LayerState state;
  state.trace.name = info.name;
  state.trace.type = info.type;
  state.trace.full_name = info.full_name;
  state.trace.depth = info.depth;
  state.trace.params = info.params;
  layers_.push_back(std::move(state));
  ids_by_name_.emplace(info.full_name, id);
  return id;
}

absl::Status TraceAggregator::AddForward(LayerId id, ForwardSample sample) {
  absl::MutexLock lock(&mu_);
  return AddForwardLocked(id, std::move(sample));
}

absl::Status TraceAggregator::AddBackward(LayerId id, const BackwardSample& sample) {
  absl::MutexLock lock(&mu_);
  return AddBackwardLocked(id, sample);
}

absl::Status TraceAggregator::Batch::AddForward(LayerId id, ForwardSample sample) {
  aggregator_->mu_.AssertHeld();
  return aggregator_->AddForwardLocked(id, std::move(sample));
}

absl::Status TraceAggregator::Batch::AddBackward(LayerId id, const BackwardSample& sample) {
  aggregator_->mu_.AssertHeld();
  return aggregator_->AddBackwardLocked(id, sample);
}

absl::StatusOr<TraceAggregator::Batch::LatestTensors> TraceAggregator::Batch::MutableLatestTensors(
    LayerId id) {
  aggregator_->mu_.AssertHeld();
  if (id < 0 || static_cast<size_t>(id) >= aggregator_->layers_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensors for layer id ", id, ", which was never declared"));
  }
  LayerTrace& t = aggregator_->layers_[static_cast<size_t>(id)].trace;
  return LatestTensors{.inputs = &t.inputs, .outputs = &t.outputs};
}

absl::Status TraceAggregator::AddForwardLocked(LayerId id, ForwardSample sample) {
  if (id < 0 || static_cast<size_t>(id) >= layers_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("forward sample for layer id ", id,
                                                   ", which was never declared (", layers_.size(),
                                                   " layers declared)"));
  }
  LayerState& s = layers_[static_cast<size_t>(id)];
  LayerTrace& t = s.trace;
  FoldLatency(sample.latency_ms, &t.latency_ms, &t.latency_ms_min, &t.latency_ms_max,
              &t.latency_ms_mean, &s.latency_sum, &s.latency_samples);
  ++t.forward_count;
  if (sample.tensors_omitted) {
    if (sample.outputs_had_nan) t.has_nan = true;
    if (sample.outputs_had_inf) NoteInf(sample.outputs_inf_in_masks_only, &t);
  } else {
    if (AnyOutputHas(sample.outputs, &NanCount)) t.has_nan = true;
    if (AnyOutputHas(sample.outputs, &InfCount)) NoteInf(InfInMasksOnly(sample.outputs), &t);
    t.inputs = std::move(sample.inputs);
    t.outputs = std::move(sample.outputs);
  }
  t.fwd_mem_alloc_delta = sample.mem_alloc_delta;
  t.fwd_mem_reserved_delta = sample.mem_reserved_delta;
  if (s.first_seen < 0) s.first_seen = next_seen_++;
  return absl::OkStatus();
}

absl::Status TraceAggregator::AddBackwardLocked(LayerId id, const BackwardSample& sample) {
  if (id < 0 || static_cast<size_t>(id) >= layers_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("backward sample for layer id ", id,
                                                   ", which was never declared (", layers_.size(),
                                                   " layers declared)"));
  }
  LayerState& s = layers_[static_cast<size_t>(id)];
  LayerTrace& t = s.trace;
  FoldLatency(sample.latency_ms, &t.bwd_latency_ms, &t.bwd_latency_ms_min, &t.bwd_latency_ms_max,
              &t.bwd_latency_ms_mean, &s.bwd_latency_sum, &s.bwd_latency_samples);
  ++t.backward_count;
  t.grad_norm = sample.grad_norm;
  t.grad_mean = sample.grad_mean;
  t.grad_in_norm = sample.grad_in_norm;
  t.grad_in_mean = sample.grad_in_mean;
  if (sample.grad_has_nan) t.grad_has_nan = true;
  if (sample.grad_all_zero) t.has_zero_grad = true;
  if (sample.grad_in_has_nan) t.grad_in_has_nan = true;
  t.bwd_mem_alloc_delta = sample.mem_alloc_delta;
  t.bwd_mem_reserved_delta = sample.mem_reserved_delta;
  // A layer whose backward is seen before any forward (its forward hook missed the call) is still
  // listed, in the order it was first observed.
  if (s.first_seen < 0) s.first_seen = next_seen_++;
  return absl::OkStatus();
}

void TraceAggregator::SetMetadata(TraceMetadata metadata) {
  absl::MutexLock lock(&mu_);
  metadata_ = std::move(metadata);
}

TraceMetadata TraceAggregator::metadata() const {
  absl::MutexLock lock(&mu_);
  return metadata_;
}

TraceRecord TraceAggregator::Snapshot() const {
  return SnapshotWith([](LayerId, LayerTrace*) {});
}

TraceRecord TraceAggregator::SnapshotWith(
    absl::FunctionRef<void(LayerId, LayerTrace*)> fill) const {
  absl::MutexLock lock(&mu_);
  TraceRecord record;
  record.metadata = metadata_;
  // first_seen values are dense in [0, next_seen_): place each observed layer (by id) at its slot.
  std::vector<LayerId> ordered(static_cast<size_t>(next_seen_), -1);
  for (size_t id = 0; id < layers_.size(); ++id) {
    if (layers_[id].first_seen >= 0) {
      ordered[static_cast<size_t>(layers_[id].first_seen)] = static_cast<LayerId>(id);
    }
  }
  record.layers.reserve(ordered.size());
  for (const LayerId id : ordered) {
    if (id < 0) continue;
    record.layers.push_back(layers_[static_cast<size_t>(id)].trace);
    fill(id, &record.layers.back());
  }
  return record;
}

void TraceAggregator::ResetObservations() {
  absl::MutexLock lock(&mu_);
  for (LayerState& s : layers_) {
    LayerState fresh;
    fresh.trace = FreshTrace(s.trace);
    s = std::move(fresh);
  }
  next_seen_ = 0;
}

int32_t TraceAggregator::declared_layers() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int32_t>(layers_.size());
}

}  // namespace tracetorch
