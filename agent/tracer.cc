#include "agent/tracer.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/tracer_internal.h"
#include "flight/recorder.h"
#include "guest/hook_guard.h"
#include "trace/forward_passes.h"
#include "trace/json_writer.h"

namespace tracetorch::agent {
namespace {

using tracer_internal::Attach;
using tracer_internal::kMinNodePrune;
using tracer_internal::Ms;
using tracer_internal::Ns;

constexpr size_t kMaxCalls = 1 << 16;         // Concurrently open calls (a leak guard).
constexpr size_t kMaxCacheEntries = 1 << 16;  // Distinct tensors reduced in one forward.

// A CallId: generation << 32 | kHasLayerBit (a declared layer: EndCall describes the outputs
// before it takes the lock) | kHasTimerBit | kRootBit | kRecomputeBit | slot + 1.
constexpr uint32_t kHasLayerBit = 1u << 31;
// The call has a CUDA timer: EndCall records its end event before it launches the outputs'
// statistics (so that they are not timed).
constexpr uint32_t kHasTimerBit = 1u << 30;
// A root call: EndCall describes its outputs too (the model's output, trace/nonfinite.h).
constexpr uint32_t kRootBit = 1u << 29;
// A recomputation (see tracer.h): EndCall computes no statistics.
constexpr uint32_t kRecomputeBit = 1u << 28;
constexpr uint32_t kSlotMask = kRecomputeBit - 1;

// Whether the calling thread is running a backward in autograd's engine: a module call now is a
// recomputation of a forward (activation checkpointing), not a forward.
bool InBackward() { return torch::autograd::get_current_graph_task_exec_info() != nullptr; }

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
  if (recorder_ != nullptr) recorder_->AddName(*id, info.full_name);
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

void Tracer::SetFlightRecorder(std::shared_ptr<flight::Recorder> recorder) {
  if (ForkedChild()) return;
  std::shared_ptr<flight::Recorder> old;
  absl::MutexLock lock(&mu_);
  old = std::move(recorder_);
  recorder_ = std::move(recorder);
  if (recorder_ == nullptr) return;
  for (size_t i = 0; i < layer_infos_.size(); ++i) {
    if (layer_infos_[i].has_value()) recorder_->AddName(static_cast<LayerId>(i), layer_names_[i]);
  }
  recorder_->SetRecording(active_, Ns(Clock::now()));
}

void Tracer::MarkPhase(flight::Phase phase) {
  if (ForkedChild()) return;
  const Clock::time_point now = Clock::now();
  absl::MutexLock lock(&mu_);
  if (recorder_ == nullptr || !active_) return;
  recorder_->Move(phase, flight::Event::kMark, kNoLayer,
                  static_cast<uint64_t>(std::max<int64_t>(steps_ - 1, 0)), Ns(now));
}

void Tracer::FlightExit(const CallState& c, Clock::time_point end,
                        std::optional<uint32_t> span_flags) {
  forward_layer_ = c.parent;
  if (recorder_ == nullptr || !active_) return;
  const uint64_t step = static_cast<uint64_t>(c.step);
  if (span_flags.has_value() && c.layer != kNoLayer) {
    recorder_->Span(flight::SpanKind::kForward, c.layer, step, Ns(c.start), Ns(end) - Ns(c.start),
                    *span_flags);
  }
  if (c.is_root) {
    recorder_->Move(flight::Phase::kOutside, flight::Event::kMark, kNoLayer, step, Ns(end));
  } else if (c.recompute) {  // Back in the backward that recomputed it.
    recorder_->Move(flight::Phase::kBackward,
                    c.parent != kNoLayer ? flight::Event::kEnter : flight::Event::kMark, c.parent,
                    step, Ns(end));
  } else {
    recorder_->Move(flight::Phase::kForward, flight::Event::kEnter, c.parent, step, Ns(end));
  }
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
  origin_finder_.Reset();
  recomputed_calls_ = 0;
  stats_cache_.Clear();
  calls_.clear();
  free_calls_.clear();
  pending_.Clear();
  results_abandoned_.store(0, std::memory_order_relaxed);
  results_deferred_ = 0;
  pending_backward_.Clear();
  call_seq_ = 0;
  deferring_.store(options_.deferred_cpu, std::memory_order_relaxed);
  active_calls_ = 0;
  open_calls_.store(0, std::memory_order_relaxed);
  forward_layer_ = kNoLayer;
  active_ = true;
  recording_.store(true, std::memory_order_release);
  if (recorder_ != nullptr) recorder_->SetRecording(true, Ns(Clock::now()));
  return absl::OkStatus();
}

void Tracer::Stop() {
  if (ForkedChild()) return;
  // Without mu_: the hooks go on while the device finishes.
  CollectAll(absl::Now() + options_.stop_wait);
  {
    absl::MutexLock lock(&mu_);
    // The last step's backward is over: a troubled gradient no layer made is the loss's.
    if (active_) NoteOrigin(origin_finder_.EndBackward());
    active_ = false;
    recording_.store(false, std::memory_order_release);
    DetachHooks();
    if (recorder_ != nullptr) recorder_->SetRecording(false, Ns(Clock::now()));
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
  return origin_finder_.origin();
}

bool Tracer::AdoptNanOrigin(NanOrigin origin) {
  if (ForkedChild()) return false;
  absl::MutexLock lock(&mu_);
  const bool found = origin_finder_.Adopt(std::move(origin));
  NoteOrigin(found);
  return found;
}

// ---- Forward ------------------------------------------------------------------------------------

TensorInfo Tracer::Describe(const at::Tensor& tensor, std::shared_ptr<DeferredStats>* deferred) {
  deferred->reset();
  TensorInfo info;
  // A nested tensor is described by its padded form (never cached: see stats_cache.h).
  const at::Tensor t = DenseView(tensor);
  const auto sizes = t.sizes();
  info.shape.assign(sizes.begin(), sizes.end());
  info.dtype = std::string(DtypeName(t.scalar_type()));
  info.device = t.device().is_cpu() ? std::string("cpu") : t.device().str();
  if (std::optional<CachedStats> hit = stats_cache_.Find(tensor)) {
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
    stats_cache_.Insert(tensor, CachedStats{TensorStats{}, *std::move(launched)});
    return info;
  }
  absl::StatusOr<TensorStats> stats = ComputeTensorStats(t, stats_mode_);
  if (!stats.ok()) {
    errors_.Record("tensor_stats", stats.status().ToString());
    return info;
  }
  Attach(*stats, stats_mode_, &info);
  stats_cache_.Insert(tensor, CachedStats{*std::move(stats), nullptr});
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

void Tracer::NoteOrigin(bool found) const {
  if (!found) return;
  NotifySink("event_sink", [&](EventSink& sink) {
    mu_.AssertHeld();
    sink.OnNanOrigin(*origin_finder_.origin());
  });
}

Tracer::CallId Tracer::BeginCall(LayerId layer, bool is_root, absl::Span<const at::Tensor> inputs) {
  if (ForkedChild()) return kNoCall;
  // A new step collects what the device has finished since (lock-free when nothing is pending).
  if (is_root) CollectCompleted();
  if (!recording_.load(std::memory_order_acquire)) return kNoCall;
  // The inputs are reduced before the lock. The first call while none is open starts a forward:
  // what was cached for the previous one is forgotten first.
  // A call during a backward is a recomputation (checkpointing): it is not a forward and does not
  // start one (the cache is left alone).
  const bool recompute = !is_root && InBackward();
  if (!recompute && open_calls_.load(std::memory_order_relaxed) == 0) stats_cache_.Clear();
  InputScan scan;
  if (!guest::GuardHook(errors_, "begin_call",
                        [&] { scan = ScanInputs(layer, is_root, recompute, inputs); })) {
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
    id = OpenCall(layer, is_root, recompute);
    if (id == kNoCall) return;
    CallState& c = *FindCall(id);
    RecordInputs(c, std::move(scan));
    if (c.timer != nullptr) id |= kHasTimerBit;
  });
  if (ok) return id;
  ReleaseCall(id);  // A half-made call is not left open (a no-op for kNoCall).
  return kNoCall;
}

Tracer::CallId Tracer::OpenCall(LayerId layer, bool is_root, bool recompute) {
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
  c.recompute = recompute;
  c.inputs.clear();
  c.input_node.reset();
  c.input_nr = 0;
  c.cuda_device.reset();
  c.mem_before.reset();
  c.timer.reset();
  c.input_stats.clear();
  c.seq = call_seq_++;
  c.parent = forward_layer_;
  forward_layer_ = layer;
  if (is_root) {
    c.step = steps_++;
  } else {
    c.step = std::max<int64_t>(steps_ - 1, 0);
  }
  ++active_calls_;
  open_calls_.store(active_calls_, std::memory_order_relaxed);
  if (recompute) ++recomputed_calls_;
  const uint32_t low = (slot + 1) | (layer != kNoLayer ? kHasLayerBit : 0u) |
                       (is_root ? kRootBit : 0u) | (recompute ? kRecomputeBit : 0u);
  return static_cast<int64_t>((static_cast<uint64_t>(c.generation) << 32) | low);
}

Tracer::InputScan Tracer::ScanInputs(LayerId layer, bool is_root, bool recompute,
                                     absl::Span<const at::Tensor> inputs) {
  InputScan scan;
  if (layer != kNoLayer && !recompute) {
    scan.cuda_device = FirstCudaDevice(inputs);
    // Before our own kernels allocate their temporaries.
    if (scan.cuda_device) scan.mem_before = SampleDeviceMemory(*scan.cuda_device);
  }
  for (const at::Tensor& t : inputs) {
    if (!t.defined() || recompute) continue;
    std::shared_ptr<DeferredStats> deferred;
    TensorInfo info = Describe(t, &deferred);
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
    if (c.is_root) PushRootMarker(c, PendingForward::Kind::kRootBegin, scan.infos, c.input_stats);
    if (layer != kNoLayer) {
      c.inputs = std::move(scan.infos);
    } else {
      c.input_stats.clear();
    }
  } else {
    if (c.is_root) NoteOrigin(origin_finder_.RootBegin(c.step, scan.infos));
    if (layer != kNoLayer) c.inputs = std::move(scan.infos);
  }
  c.input_node = std::move(scan.input_node);
  c.input_nr = scan.input_nr;
  c.cuda_device = scan.cuda_device;
  c.mem_before = scan.mem_before;
  c.timer = std::move(scan.timer);
  c.start = Clock::now();
  if (recorder_ != nullptr) {
    const uint64_t step = static_cast<uint64_t>(c.step);
    if (c.is_root) recorder_->BeginStep(step, Ns(c.start));
    // A recomputation (checkpointing) runs inside a backward: the position stays in that phase.
    recorder_->Move(c.recompute ? flight::Phase::kBackward : flight::Phase::kForward,
                    flight::Event::kEnter, layer, step, Ns(c.start));
  }
}

Tracer::OutputScan Tracer::ScanOutputs(absl::Span<const at::Tensor> outputs, bool describe) {
  OutputScan scan;
  if (describe) {
    scan.cuda_device = FirstCudaDevice(outputs);
    // Before our own kernels allocate their temporaries.
    if (scan.cuda_device) scan.mem_after = SampleDeviceMemory(*scan.cuda_device);
    scan.infos.reserve(outputs.size());
  }
  for (const at::Tensor& t : outputs) {
    if (!t.defined()) continue;
    if (describe) {
      std::shared_ptr<DeferredStats> deferred;
      scan.infos.push_back(Describe(t, &deferred));
      scan.stats.push_back(std::move(deferred));
    }
    if (scan.grad_output == nullptr && t.requires_grad() && t.grad_fn()) scan.grad_output = &t;
  }
  return scan;
}

void Tracer::EndCall(CallId id, absl::Span<const at::Tensor> outputs) {
  EndCall(id, outputs, Clock::now());
}

void Tracer::EndCall(CallId id, absl::Span<const at::Tensor> outputs, Clock::time_point end) {
  if (id == kNoCall || ForkedChild()) return;
  // A declared layer's and a root call's outputs are reduced before the lock; a recomputation's
  // only give the output its backward starts from.
  const uint32_t bits = static_cast<uint32_t>(id & 0xffffffff);
  if ((bits & kHasTimerBit) != 0) {
    // The GPU time ends here, before our kernels for the outputs (an event record, no wait).
    absl::MutexLock lock(&mu_);
    if (CallState* c = FindCall(id); c != nullptr && c->timer != nullptr) c->timer->Stop();
  }
  OutputScan scan;
  bool scanned = true;
  if ((bits & (kHasLayerBit | kRootBit)) != 0 && recording_.load(std::memory_order_acquire)) {
    const bool describe = (bits & kRecomputeBit) == 0;
    scanned = guest::GuardHook(errors_, "end_call", [&] { scan = ScanOutputs(outputs, describe); });
  }
  absl::MutexLock lock(&mu_);
  CallState* c = FindCall(id);
  if (c == nullptr) return;
  if (scanned) {
    guest::GuardHook(errors_, "end_call", [&] {
      mu_.AssertHeld();
      // The span's flag follows the non-finite rule (trace/nonfinite.h): a mask's -inf is none.
      FlightExit(*c, end,
                 AnyTrouble(scan.infos) ? static_cast<uint32_t>(flight::kSpanNonFinite) : 0u);
      CloseCall(*c, std::move(scan), end);
    });
  } else {
    FlightExit(*c, end, std::nullopt);
  }
  ReleaseCall(id);
}

void Tracer::CloseCall(CallState& c, OutputScan scan, Clock::time_point end) {
  const bool deferring = deferring_.load(std::memory_order_relaxed);
  if (active_ && c.recompute) {
    // Not a forward: only its backward is measured (the recomputed graph is what it runs through).
    if (c.layer != kNoLayer && scan.grad_output != nullptr && c10::GradMode::is_enabled()) {
      RegisterBackward(c, *scan.grad_output);
    }
    return;
  }
  // The model's outputs, for the origin (a root that is a layer moves them into its sample).
  std::vector<TensorInfo> root_outputs;
  std::vector<std::shared_ptr<DeferredStats>> root_output_stats;
  if (c.is_root) {
    root_outputs = scan.infos;
    root_output_stats = scan.stats;
  }
  if (active_ && c.layer != kNoLayer) {
    ForwardSample sample;
    sample.latency_ms = Ms(end - c.start);
    sample.inputs = std::move(c.inputs);
    sample.outputs = std::move(scan.infos);
    if (!deferring) {
      NoteOrigin(origin_finder_.CallEnd(layer_names_[c.layer], c.step, c.seq, sample.inputs,
                                        sample.outputs));
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
    PushRootMarker(c, PendingForward::Kind::kRootEnd, std::move(root_outputs),
                   std::move(root_output_stats));
  } else if (active_ && c.is_root) {
    NoteOrigin(origin_finder_.RootEnd(c.step, root_outputs));
  }
}

void Tracer::AbortCall(CallId id) {
  if (id == kNoCall || ForkedChild()) return;
  const Clock::time_point now = Clock::now();
  absl::MutexLock lock(&mu_);
  guest::GuardHook(errors_, "abort_call", [&] {
    mu_.AssertHeld();
    if (const CallState* c = FindCall(id); c != nullptr) FlightExit(*c, now, std::nullopt);
    ReleaseCall(id);
  });
}

// ---- Snapshots ----------------------------------------------------------------------------------

TraceRecord Tracer::SnapshotLocked() const {
  TraceRecord record = aggregator_.Snapshot();
  record.metadata.nan_origin = origin_finder_.origin();
  record.metadata.SetExtra("hook_errors", absl::StrCat(errors_.count()));
  if (recomputed_calls_ > 0) {
    record.metadata.SetExtra("recomputed_calls", absl::StrCat(recomputed_calls_));
  }
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

TraceRecord Tracer::WatchSnapshot() const {
  if (ForkedChild()) return TraceRecord{};
  CollectCompleted();
  absl::MutexLock lock(&mu_);
  TraceRecord record = SnapshotLocked();
  if (recorder_ == nullptr || !active_) return record;
  absl::StatusOr<flight::PositionView> p =
      flight::ReadPosition(recorder_->data(), recorder_->size());
  if (!p.ok() || !p->recording) return record;
  absl::flat_hash_map<int32_t, std::string> names;
  if (p->layer >= 0 && static_cast<size_t>(p->layer) < layer_names_.size()) {
    names[p->layer] = layer_names_[p->layer];
  }
  const absl::Duration age = absl::Nanoseconds(flight::Recorder::MonotonicNs() - p->since_ns);
  const absl::Duration threshold =
      flight::StallThreshold(options_.stall_rule, flight::MedianStepTime(*p));
  std::string position;  // Metadata extras are JSON text.
  AppendJsonString(flight::Describe(*p, names), &position);
  record.metadata.SetExtra("flight_position", std::move(position));
  record.metadata.SetExtra("flight_position_age_s",
                           absl::StrFormat("%.1f", absl::ToDoubleSeconds(age)));
  record.metadata.SetExtra("flight_stalled", age >= threshold ? "true" : "false");
  return record;
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
