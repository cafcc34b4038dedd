#include "agent/tracer.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/tracer_internal.h"
#include "guest/hook_guard.h"
#include "trace/forward_passes.h"

namespace tracetorch::agent {
namespace {

using tracer_internal::Attach;
using tracer_internal::kMinNodePrune;
using tracer_internal::Ms;

constexpr size_t kMaxCalls = 1 << 16;         // Concurrently open calls (a leak guard).
constexpr size_t kMaxCacheEntries = 1 << 16;  // Distinct tensors reduced in one forward.

// A CallId: generation << 32 | kHasLayerBit (a declared layer: EndCall describes the outputs
// before it takes the lock) | kHasTimerBit | slot + 1.
constexpr uint32_t kHasLayerBit = 1u << 31;
// The call has a CUDA timer: EndCall records its end event before it launches the outputs'
// statistics (so that they are not timed).
constexpr uint32_t kHasTimerBit = 1u << 30;
constexpr uint32_t kSlotMask = kHasTimerBit - 1;

bool HasNonFinite(const TensorInfo& t) { return NanCount(t) > 0 || InfCount(t) > 0; }

// Folds one tensor's NaN/Inf counts into a scan's `finite` / `have_nan`.
void NoteNonFinite(const TensorInfo& t, bool* finite, bool* have_nan) {
  if (!HasNonFinite(t)) return;
  *finite = false;
  *have_nan = *have_nan || NanCount(t) > 0;
}

// The device of the first defined CUDA tensor, if any.
std::optional<c10::Device> FirstCudaDevice(absl::Span<const at::Tensor> tensors) {
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.is_cuda()) return t.device();
  }
  return std::nullopt;
}

}  // namespace

// ---- Lifecycle ----------------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<Tracer>> Tracer::Create(TracerOptions options,
                                                       TraceMetadata metadata) {
  if (absl::Status s = options.thresholds.Validate(); !s.ok()) return s;
  return std::shared_ptr<Tracer>(new Tracer(std::move(options), std::move(metadata)));
}

Tracer::Tracer(TracerOptions options, TraceMetadata metadata)
    : options_(std::move(options)),
      stats_mode_(options_.capture_stats ? StatsMode::kFull : StatsMode::kNonFiniteOnly),
      aggregator_(std::move(metadata)),
      stats_cache_(kMaxCacheEntries),
      prune_nodes_at_(kMinNodePrune) {}

Tracer::~Tracer() {
  if (ForkedChild()) return;  // Never touch locks another process's thread may have held.
  absl::MutexLock lock(&mu_);
  active_ = false;
  DetachHooks();
}

absl::StatusOr<Tracer::LayerId> Tracer::DeclareLayer(const LayerInfo& info) {
  if (ForkedChild())
    return absl::FailedPreconditionError("cannot declare layers in a forked child");
  absl::StatusOr<LayerId> id = aggregator_.DeclareLayer(info);
  if (!id.ok()) return id;
  absl::MutexLock lock(&mu_);
  if (static_cast<size_t>(*id) >= layer_names_.size()) {
    layer_names_.resize(*id + 1);
    layer_infos_.resize(*id + 1);
  }
  layer_names_[*id] = info.full_name;
  layer_infos_[*id] = info;
  NotifySink("event_sink", [&](EventSink& sink) { sink.OnLayerDeclared(*id, info); });
  return id;
}

void Tracer::SetEventSink(std::shared_ptr<EventSink> sink) {
  if (ForkedChild()) return;
  std::shared_ptr<EventSink> old;
  {
    absl::MutexLock lock(&mu_);
    old = std::move(sink_);
    sink_ = std::move(sink);
    NotifySink("event_sink", [&](EventSink& s) {
      mu_.AssertHeld();
      for (size_t i = 0; i < layer_infos_.size(); ++i) {
        if (layer_infos_[i].has_value())
          s.OnLayerDeclared(static_cast<LayerId>(i), *layer_infos_[i]);
      }
    });
  }
  // `old` is released here, outside the lock (its destructor may wait for a thread).
}

void Tracer::NotifySink(std::string_view cause, absl::FunctionRef<void(EventSink&)> fn) const {
  if (sink_ == nullptr) return;
  EventSink& sink = *sink_;
  guest::GuardHook(errors_, cause, [&] { fn(sink); });
}

absl::Status Tracer::AddForwardSample(LayerId layer, int64_t step, ForwardSample sample) const {
  // The sink reads the sample before the aggregator takes it (no copy). Layers are checked at
  // BeginCall, so the aggregator accepts every sample that gets here.
  NotifySink("event_sink", [&](EventSink& sink) { sink.OnForward(layer, step, sample); });
  return aggregator_.AddForward(layer, std::move(sample));
}

absl::Status Tracer::Start() {
  if (ForkedChild()) return absl::FailedPreconditionError("cannot trace in a forked child");
  absl::MutexLock lock(&mu_);
  if (active_) return absl::FailedPreconditionError("the trace session is already active");
  DetachHooks();
  aggregator_.ResetObservations();
  ++epoch_;
  steps_ = 0;
  errors_.Reset();
  tensor_reductions_.store(0, std::memory_order_relaxed);
  nan_origin_.reset();
  origin_candidate_.reset();
  stats_cache_.Clear();
  calls_.clear();
  free_calls_.clear();
  pending_.Clear();
  results_abandoned_.store(0, std::memory_order_relaxed);
  results_deferred_ = 0;
  pending_backward_.Clear();
  collect_candidate_.reset();
  call_seq_ = 0;
  deferring_.store(options_.deferred_cpu, std::memory_order_relaxed);
  active_calls_ = 0;
  open_calls_.store(0, std::memory_order_relaxed);
  active_ = true;
  recording_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

void Tracer::Stop() {
  if (ForkedChild()) return;
  // Without mu_: the hooks go on while the device finishes.
  CollectAll(absl::Now() + options_.stop_wait);
  {
    absl::MutexLock lock(&mu_);
    active_ = false;
    recording_.store(false, std::memory_order_release);
    DetachHooks();
  }
  stats_cache_.Clear();
}

bool Tracer::active() const {
  if (ForkedChild()) return false;
  absl::MutexLock lock(&mu_);
  return active_;
}

void Tracer::SetMetadata(TraceMetadata metadata) {
  if (ForkedChild()) return;
  aggregator_.SetMetadata(std::move(metadata));
}

// ---- Errors -------------------------------------------------------------------------------------

int64_t Tracer::hook_errors() const { return ForkedChild() ? 0 : errors_.count(); }

int64_t Tracer::tensor_reductions() const {
  return ForkedChild() ? 0 : tensor_reductions_.load(std::memory_order_relaxed);
}

int64_t Tracer::steps() const {
  if (ForkedChild()) return 0;
  absl::MutexLock lock(&mu_);
  return steps_;
}

int64_t Tracer::results_in_flight() const {
  return ForkedChild() ? 0 : pending_.in_flight() + pending_backward_.in_flight();
}

std::optional<NanOrigin> Tracer::nan_origin() const {
  if (ForkedChild()) return std::nullopt;
  absl::MutexLock lock(&mu_);
  return nan_origin_;
}

// ---- Forward ------------------------------------------------------------------------------------

TensorInfo Tracer::Describe(const at::Tensor& t, std::shared_ptr<DeferredStats>* deferred) {
  deferred->reset();
  TensorInfo info;
  const auto sizes = t.sizes();
  info.shape.assign(sizes.begin(), sizes.end());
  info.dtype = std::string(DtypeName(t.scalar_type()));
  info.device = t.device().is_cpu() ? std::string("cpu") : t.device().str();
  if (std::optional<CachedStats> hit = stats_cache_.Find(t)) {
    if (hit->deferred != nullptr) {
      *deferred = std::move(hit->deferred);
    } else {
      Attach(hit->ready, stats_mode_, &info);
    }
    return info;
  }
  if (options_.before_reduce) options_.before_reduce(t);
  tensor_reductions_.fetch_add(1, std::memory_order_relaxed);
  if (Defers(t)) {
    // Kernels on the tensor's stream into a small device buffer, copied without waiting.
    absl::StatusOr<std::shared_ptr<DeferredStats>> launched =
        DeferredStats::LaunchTensor(t, stats_mode_);
    if (!launched.ok()) {
      errors_.Record("tensor_stats", launched.status().ToString());
      return info;
    }
    deferring_.store(true, std::memory_order_relaxed);
    *deferred = *launched;
    stats_cache_.Insert(t, CachedStats{TensorStats{}, *std::move(launched)});
    return info;
  }
  absl::StatusOr<TensorStats> stats = ComputeTensorStats(t, stats_mode_);
  if (!stats.ok()) {
    errors_.Record("tensor_stats", stats.status().ToString());
    return info;
  }
  Attach(*stats, stats_mode_, &info);
  stats_cache_.Insert(t, CachedStats{*std::move(stats), nullptr});
  return info;
}

Tracer::CallState* Tracer::FindCall(CallId id) {
  const uint32_t slot = (static_cast<uint32_t>(id & 0xffffffff) & kSlotMask) - 1;
  const uint32_t generation = static_cast<uint32_t>(static_cast<uint64_t>(id) >> 32);
  if (slot >= calls_.size()) return nullptr;
  CallState& c = calls_[slot];
  if (!c.in_use || c.generation != generation) return nullptr;
  return &c;
}

void Tracer::ReleaseCall(CallId id) {
  CallState* c = FindCall(id);
  if (c == nullptr) return;
  c->in_use = false;
  c->input_node.reset();
  c->inputs.clear();
  c->timer.reset();
  free_calls_.push_back((static_cast<uint32_t>(id & 0xffffffff) & kSlotMask) - 1);
  if (active_calls_ > 0) --active_calls_;
  open_calls_.store(active_calls_, std::memory_order_relaxed);
}

void Tracer::MaybeSetOrigin(std::string_view layer, int64_t step, bool is_nan) const {
  if (nan_origin_.has_value()) return;
  nan_origin_ = NanOrigin{std::string(layer), step, is_nan};
  NotifySink("event_sink", [&](EventSink& sink) {
    mu_.AssertHeld();
    sink.OnNanOrigin(*nan_origin_);
  });
}

Tracer::CallId Tracer::BeginCall(LayerId layer, bool is_root, absl::Span<const at::Tensor> inputs) {
  if (ForkedChild()) return kNoCall;
  // A new step collects what the device has finished since (lock-free when nothing is pending).
  if (is_root) CollectCompleted();
  if (!recording_.load(std::memory_order_acquire)) return kNoCall;
  // The inputs are reduced before the lock. The first call while none is open starts a forward:
  // what was cached for the previous one is forgotten first.
  if (open_calls_.load(std::memory_order_relaxed) == 0) stats_cache_.Clear();
  InputScan scan;
  if (!guest::GuardHook(errors_, "begin_call",
                        [&] { scan = ScanInputs(layer, is_root, inputs); })) {
    return kNoCall;
  }
  absl::MutexLock lock(&mu_);
  if (!active_) return kNoCall;
  if (layer != kNoLayer && (layer < 0 || static_cast<size_t>(layer) >= layer_names_.size())) {
    errors_.Record("unknown_layer", absl::StrCat("BeginCall for undeclared layer ", layer));
    return kNoCall;
  }
  CallId id = kNoCall;
  const bool ok = guest::GuardHook(errors_, "begin_call", [&] {
    mu_.AssertHeld();
    id = OpenCall(layer, is_root);
    if (id == kNoCall) return;
    CallState& c = *FindCall(id);
    RecordInputs(c, std::move(scan));
    if (c.timer != nullptr) id |= kHasTimerBit;
  });
  if (ok) return id;
  ReleaseCall(id);  // A half-made call is not left open (a no-op for kNoCall).
  return kNoCall;
}

Tracer::CallId Tracer::OpenCall(LayerId layer, bool is_root) {
  uint32_t slot;
  if (!free_calls_.empty()) {
    slot = free_calls_.back();
    free_calls_.pop_back();
  } else if (calls_.size() < kMaxCalls) {
    slot = static_cast<uint32_t>(calls_.size());
    calls_.emplace_back();
  } else {
    errors_.Record("too_many_open_calls", "more than 65536 module calls open at once");
    return kNoCall;
  }
  static std::atomic<uint32_t> next_generation{1};
  CallState& c = calls_[slot];
  c.in_use = true;
  c.generation = next_generation.fetch_add(1, std::memory_order_relaxed);
  c.layer = layer;
  c.is_root = is_root;
  c.inputs.clear();
  c.inputs_finite = true;
  c.inputs_have_nan = false;
  c.input_node.reset();
  c.input_nr = 0;
  c.cuda_device.reset();
  c.mem_before.reset();
  c.timer.reset();
  c.input_stats.clear();
  c.seq = call_seq_++;
  if (is_root) {
    c.step = steps_++;
    origin_candidate_.reset();
  } else {
    c.step = std::max<int64_t>(steps_ - 1, 0);
  }
  ++active_calls_;
  open_calls_.store(active_calls_, std::memory_order_relaxed);
  const uint32_t low = (slot + 1) | (layer != kNoLayer ? kHasLayerBit : 0u);
  return static_cast<int64_t>((static_cast<uint64_t>(c.generation) << 32) | low);
}

Tracer::InputScan Tracer::ScanInputs(LayerId layer, bool is_root,
                                     absl::Span<const at::Tensor> inputs) {
  InputScan scan;
  if (layer != kNoLayer) {
    scan.cuda_device = FirstCudaDevice(inputs);
    // Before our own kernels allocate their temporaries.
    if (scan.cuda_device) scan.mem_before = SampleDeviceMemory(*scan.cuda_device);
  }
  for (const at::Tensor& t : inputs) {
    if (!t.defined()) continue;
    std::shared_ptr<DeferredStats> deferred;
    TensorInfo info = Describe(t, &deferred);
    NoteNonFinite(info, &scan.finite, &scan.have_nan);
    if (layer != kNoLayer || is_root) {
      scan.infos.push_back(std::move(info));
      scan.stats.push_back(std::move(deferred));
    }
  }
  if (layer == kNoLayer) return scan;
  if (c10::GradMode::is_enabled()) {
    for (const at::Tensor& t : inputs) {
      if (!t.defined() || !t.requires_grad()) continue;
      torch::autograd::Edge edge = torch::autograd::impl::gradient_edge(t);
      if (edge.function) {
        scan.input_node = std::move(edge.function);
        scan.input_nr = edge.input_nr;
      }
      break;
    }
  }
  if (scan.cuda_device) {
    // After our kernels for the inputs: they are not timed.
    scan.timer = DeviceTimer::Start(*scan.cuda_device);
    if (scan.timer != nullptr) deferring_.store(true, std::memory_order_relaxed);
  }
  return scan;
}

void Tracer::RecordInputs(CallState& c, InputScan scan) {
  const LayerId layer = c.layer;
  if (deferring_.load(std::memory_order_relaxed)) {
    // The statistics may still be on the device: the origin is decided when they are collected.
    c.input_stats = std::move(scan.stats);
    if (c.is_root) PushRootMarker(c, PendingForward::Kind::kRootBegin, scan.infos);
    if (layer != kNoLayer) {
      c.inputs = std::move(scan.infos);
    } else {
      c.input_stats.clear();
    }
  } else if (layer != kNoLayer) {
    c.inputs = std::move(scan.infos);
  }
  c.inputs_finite = scan.finite;
  c.inputs_have_nan = scan.have_nan;
  if (!c.inputs_finite && !deferring_.load(std::memory_order_relaxed)) {
    if (c.is_root) {
      MaybeSetOrigin(NanOrigin::kModelInput, c.step, c.inputs_have_nan);
    } else if (!origin_candidate_ && layer != kNoLayer) {
      origin_candidate_ = NanOrigin{layer_names_[layer], c.step, c.inputs_have_nan};
    }
  }
  c.input_node = std::move(scan.input_node);
  c.input_nr = scan.input_nr;
  c.cuda_device = scan.cuda_device;
  c.mem_before = scan.mem_before;
  c.timer = std::move(scan.timer);
  c.start = Clock::now();
}

Tracer::OutputScan Tracer::ScanOutputs(absl::Span<const at::Tensor> outputs) {
  OutputScan scan;
  scan.cuda_device = FirstCudaDevice(outputs);
  // Before our own kernels allocate their temporaries.
  if (scan.cuda_device) scan.mem_after = SampleDeviceMemory(*scan.cuda_device);
  scan.infos.reserve(outputs.size());
  for (const at::Tensor& t : outputs) {
    if (!t.defined()) continue;
    std::shared_ptr<DeferredStats> deferred;
    TensorInfo info = Describe(t, &deferred);
    NoteNonFinite(info, &scan.finite, &scan.have_nan);
    scan.infos.push_back(std::move(info));
    scan.stats.push_back(std::move(deferred));
    if (scan.grad_output == nullptr && t.requires_grad() && t.grad_fn()) scan.grad_output = &t;
  }
  return scan;
}

void Tracer::EndCall(CallId id, absl::Span<const at::Tensor> outputs) {
  EndCall(id, outputs, Clock::now());
}

void Tracer::EndCall(CallId id, absl::Span<const at::Tensor> outputs, Clock::time_point end) {
  if (id == kNoCall || ForkedChild()) return;
  // A declared layer's outputs are reduced before the lock (a root call's are not recorded).
  if ((static_cast<uint32_t>(id & 0xffffffff) & kHasTimerBit) != 0) {
    // The GPU time ends here, before our kernels for the outputs (an event record, no wait).
    absl::MutexLock lock(&mu_);
    if (CallState* c = FindCall(id); c != nullptr && c->timer != nullptr) c->timer->Stop();
  }
  OutputScan scan;
  bool scanned = true;
  if ((static_cast<uint32_t>(id & 0xffffffff) & kHasLayerBit) != 0 &&
      recording_.load(std::memory_order_acquire)) {
    scanned = guest::GuardHook(errors_, "end_call", [&] { scan = ScanOutputs(outputs); });
  }
  absl::MutexLock lock(&mu_);
  CallState* c = FindCall(id);
  if (c == nullptr) return;
  if (scanned) {
    guest::GuardHook(errors_, "end_call", [&] {
      mu_.AssertHeld();
      CloseCall(*c, std::move(scan), end);
    });
  }
  ReleaseCall(id);
}

void Tracer::CloseCall(CallState& c, OutputScan scan, Clock::time_point end) {
  const bool deferring = deferring_.load(std::memory_order_relaxed);
  if (active_ && c.layer != kNoLayer) {
    ForwardSample sample;
    sample.latency_ms = Ms(end - c.start);
    sample.inputs = std::move(c.inputs);
    sample.outputs = std::move(scan.infos);
    if (!deferring && c.inputs_finite && !scan.finite) {
      MaybeSetOrigin(layer_names_[c.layer], c.step, scan.have_nan);
    }
    if (scan.grad_output != nullptr && c10::GradMode::is_enabled()) {
      RegisterBackward(c, *scan.grad_output);
    }
    if (c.cuda_device && c.mem_before && scan.mem_after && scan.cuda_device == c.cuda_device) {
      sample.mem_alloc_delta = scan.mem_after->allocated - c.mem_before->allocated;
      sample.mem_reserved_delta = scan.mem_after->reserved - c.mem_before->reserved;
    }
    if (deferring) {  // A timer was stopped by EndCall.
      DeferForward(c, std::move(sample), std::move(scan.stats));
    } else if (absl::Status s = AddForwardSample(c.layer, c.step, std::move(sample)); !s.ok()) {
      errors_.Record("add_forward", s.ToString());
    }
  }
  if (active_ && c.is_root && deferring) {
    PushRootMarker(c, PendingForward::Kind::kRootEnd, {});
  } else if (active_ && c.is_root && !nan_origin_ && origin_candidate_) {
    nan_origin_ = origin_candidate_;
    NotifySink("event_sink", [&](EventSink& sink) {
      mu_.AssertHeld();
      sink.OnNanOrigin(*nan_origin_);
    });
  }
}

void Tracer::AbortCall(CallId id) {
  if (id == kNoCall || ForkedChild()) return;
  absl::MutexLock lock(&mu_);
  guest::GuardHook(errors_, "abort_call", [&] {
    mu_.AssertHeld();
    ReleaseCall(id);
  });
}

// ---- Snapshots ----------------------------------------------------------------------------------

TraceRecord Tracer::SnapshotLocked() const {
  TraceRecord record = aggregator_.Snapshot();
  record.metadata.nan_origin = nan_origin_;
  record.metadata.SetExtra("hook_errors", absl::StrCat(errors_.count()));
  SetForwardPasses(steps_, &record);
  if (results_deferred_ > 0) {  // Only sessions that deferred (CUDA, deferred_cpu) say so.
    record.metadata.SetExtra("results_in_flight", absl::StrCat(results_in_flight()));
    record.metadata.SetExtra("results_abandoned",
                             absl::StrCat(results_abandoned_.load(std::memory_order_relaxed)));
  }
  return record;
}

TraceRecord Tracer::Snapshot() const {
  if (ForkedChild()) return TraceRecord{};
  CollectCompleted();  // What has completed; never waits.
  absl::MutexLock lock(&mu_);
  return SnapshotLocked();
}

absl::StatusOr<TraceRecord> Tracer::Finalize(std::optional<double> total_time_ms) const {
  if (ForkedChild()) return absl::FailedPreconditionError("cannot finalize in a forked child");
  CollectCompleted();
  absl::MutexLock lock(&mu_);
  TraceRecord record = SnapshotLocked();
  record.metadata.total_time_ms = total_time_ms;
  absl::StatusOr<std::vector<Anomaly>> anomalies = DetectAnomalies(record, options_.thresholds);
  if (!anomalies.ok()) return anomalies.status();
  record.warnings = *std::move(anomalies);
  return record;
}

}  // namespace tracetorch::agent
