// The Tracer's backward half (see agent/tracer.h): the C++ autograd hooks it attaches to the nodes
// of traced calls, and what they record. The forward path (tracer.cc) registers a call's backward
// at EndCall through RegisterBackward().
#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "agent/tracer.h"
#include "agent/tracer_internal.h"
#include "flight/recorder.h"

namespace tracetorch::agent {
namespace {

using torch::autograd::FunctionPostHook;
using torch::autograd::FunctionPreHook;
using torch::autograd::Node;
using torch::autograd::variable_list;
using tracer_internal::kMinNodePrune;
using tracer_internal::Ms;
using tracer_internal::Ns;
using tracer_internal::SetMemoryDelta;

constexpr size_t kMaxListenersPerNode = 1024;  // Oldest dropped past this.

class PreHook final : public FunctionPreHook {
 public:
  PreHook(std::weak_ptr<Tracer> tracer, std::shared_ptr<NodeListeners> state)
      : tracer_(std::move(tracer)), state_(std::move(state)) {}
  variable_list operator()(const variable_list& grads) override {
    if (std::shared_ptr<Tracer> tracer = tracer_.lock()) tracer->OnGradReady(*state_, grads);
    return grads;
  }
  const NodeListeners* state() const { return state_.get(); }

 private:
  const std::weak_ptr<Tracer> tracer_;
  const std::shared_ptr<NodeListeners> state_;
};

class PostHook final : public FunctionPostHook {
 public:
  PostHook(std::weak_ptr<Tracer> tracer, std::shared_ptr<NodeListeners> state)
      : tracer_(std::move(tracer)), state_(std::move(state)) {}
  variable_list operator()(const variable_list& outputs, const variable_list& /*inputs*/) override {
    if (std::shared_ptr<Tracer> tracer = tracer_.lock()) tracer->OnNodeDone(*state_);
    return outputs;
  }
  const NodeListeners* state() const { return state_.get(); }

 private:
  const std::weak_ptr<Tracer> tracer_;
  const std::shared_ptr<NodeListeners> state_;
};

// The sample of a backward call that `bc` started, ended at `end`: latency and the output
// gradient's statistics.
BackwardSample StartedSample(const BackwardCall& bc, std::chrono::steady_clock::time_point end) {
  BackwardSample sample;
  sample.latency_ms = std::max(0.0, Ms(end - bc.start));
  if (bc.out) {
    sample.grad_norm = bc.out->norm;
    sample.grad_mean = bc.out->mean;
    sample.grad_has_nan = bc.out->has_nan;
    sample.grad_all_zero = bc.out->all_zero;
  }
  return sample;
}

uint32_t NonFiniteFlag(bool nonfinite) { return nonfinite ? flight::kSpanNonFinite : 0u; }

}  // namespace

// ---- Backward -----------------------------------------------------------------------------------

std::shared_ptr<NodeListeners> Tracer::ListenersFor(const NodePtr& node, bool need_post_hook) {
  std::shared_ptr<NodeListeners> state;
  if (auto it = nodes_.find(node.get()); it != nodes_.end()) state = it->second.lock();
  if (state == nullptr) {
    state = std::make_shared<NodeListeners>(WeakNodePtr(node));
    node->add_pre_hook(std::make_unique<PreHook>(weak_from_this(), state));
    nodes_[node.get()] = state;
    if (nodes_.size() >= prune_nodes_at_) {
      absl::erase_if(nodes_, [](const auto& kv) { return kv.second.expired(); });
      prune_nodes_at_ = std::max(kMinNodePrune, 2 * nodes_.size());
    }
  } else {
    // A node that outlives its forward (the accumulator of a leaf input reused every step) keeps
    // its hook; drop listeners that can no longer fire.
    auto stale = [epoch = epoch_](const Listener& l) {
      return l.call->epoch != epoch ||
             (l.role == Listener::Role::kInput && l.call->output_node.expired());
    };
    state->listeners.erase(std::remove_if(state->listeners.begin(), state->listeners.end(), stale),
                           state->listeners.end());
    if (state->listeners.size() >= kMaxListenersPerNode) {
      state->listeners.erase(state->listeners.begin());
    }
  }
  if (need_post_hook && !state->has_post_hook) {
    node->add_post_hook(std::make_unique<PostHook>(weak_from_this(), state));
    state->has_post_hook = true;
  }
  return state;
}

void Tracer::RegisterBackward(CallState& call, const at::Tensor& output) {
  torch::autograd::Edge out_edge = torch::autograd::impl::gradient_edge(output);
  if (!out_edge.function) return;
  auto bc = std::make_shared<BackwardCall>();
  bc->layer = call.layer;
  bc->step = call.step;
  bc->epoch = epoch_;
  bc->has_input_edge = call.input_node != nullptr;
  std::shared_ptr<NodeListeners> out_state =
      ListenersFor(out_edge.function, /*need_post_hook=*/!bc->has_input_edge);
  bc->output_node = out_state;
  out_state->listeners.push_back(
      Listener{Listener::Role::kOutput, static_cast<uint32_t>(out_edge.input_nr), bc});
  if (bc->has_input_edge) {
    std::shared_ptr<NodeListeners> in_state =
        ListenersFor(call.input_node, /*need_post_hook=*/false);
    in_state->listeners.push_back(Listener{Listener::Role::kInput, call.input_nr, bc});
  }
}

void Tracer::AddBackwardSample(LayerId layer, int64_t step, const BackwardSample& sample) const {
  if (absl::Status s = aggregator_.AddBackward(layer, sample); !s.ok()) {
    errors_.Record("add_backward", s.ToString());
    return;
  }
  NotifySink("event_sink", [&](EventSink& sink) { sink.OnBackward(layer, step, sample); });
  if (static_cast<size_t>(layer) < layer_names_.size()) {
    NoteOrigin(origin_finder_.Backward(layer_names_[layer], step, sample));
  }
}

std::optional<GradStats> Tracer::ReduceGrad(const at::Tensor& grad,
                                            std::shared_ptr<DeferredStats>* deferred) {
  deferred->reset();
  if (options_.before_reduce) options_.before_reduce(grad);
  if (Defers(grad)) {
    absl::StatusOr<std::shared_ptr<DeferredStats>> launched = DeferredStats::LaunchGrad(grad);
    if (!launched.ok()) {
      errors_.Record("grad_stats", launched.status().ToString());
      return std::nullopt;
    }
    deferring_.store(true, std::memory_order_relaxed);
    *deferred = *std::move(launched);
    return std::nullopt;
  }
  absl::StatusOr<GradStats> s = ComputeGradStats(grad);
  if (s.ok()) return *s;
  errors_.Record("grad_stats", s.status().ToString());
  return std::nullopt;
}

std::vector<uint32_t> Tracer::NeededGradSlots(const NodeListeners& node,
                                              const std::vector<at::Tensor>& grads) const {
  std::vector<uint32_t> slots;
  for (const Listener& l : node.listeners) {
    if (l.call->epoch != epoch_) continue;
    if (l.role == Listener::Role::kInput && !l.call->started) continue;
    if (l.nr >= grads.size() || !grads[l.nr].defined()) continue;
    if (std::find(slots.begin(), slots.end(), l.nr) == slots.end()) slots.push_back(l.nr);
  }
  return slots;
}

void Tracer::OnGradReady(NodeListeners& node, const std::vector<at::Tensor>& grads) {
  const Clock::time_point enter = Clock::now();
  if (ForkedChild() || !recording_.load(std::memory_order_acquire)) return;
  guest::GuardHook(errors_, "grad_ready", [&] {
    // Under the lock only to learn which gradients a listener needs; reduced without it.
    std::vector<uint32_t> slots;
    {
      absl::MutexLock lock(&mu_);
      if (!active_) return;
      slots = NeededGradSlots(node, grads);
    }
    std::optional<DeviceMemory> memory;  // Before our kernels allocate their temporaries.
    for (uint32_t nr : slots) {
      if (grads[nr].is_cuda()) {
        memory = SampleDeviceMemory(grads[nr].device());
        break;
      }
    }
    std::vector<SlotGradStats> stats;
    for (uint32_t nr : slots) {
      SlotGradStats& slot = stats.emplace_back();
      slot.nr = nr;
      slot.ready = ReduceGrad(grads[nr], &slot.deferred);
    }
    absl::MutexLock lock(&mu_);
    if (!active_) return;
    GradReadyLocked(node, grads, stats, memory, enter);
  });
}

void Tracer::GradReadyLocked(NodeListeners& node, const std::vector<at::Tensor>& grads,
                             const std::vector<SlotGradStats>& stats,
                             const std::optional<DeviceMemory>& memory, Clock::time_point enter) {
  static const SlotGradStats kNone;  // Not needed when the lock was first taken (a newer listener).
  auto stats_for = [&](uint32_t nr) -> const SlotGradStats& {
    for (const SlotGradStats& s : stats) {
      if (s.nr == nr) return s;
    }
    return kNone;
  };
  bool any_started = false;
  const BackwardCall* entered = nullptr;  // The flight position: the last call started here...
  const BackwardCall* left = nullptr;     // ...else the last one ended here.
  // Starts first, so that a call whose output is its input (Identity) starts and ends here.
  for (Listener& l : node.listeners) {
    if (l.role != Listener::Role::kOutput || l.call->epoch != epoch_) continue;
    const SlotGradStats& out = stats_for(l.nr);
    l.call->out = out.ready;
    l.call->out_stats = out.deferred;
    if (l.nr < grads.size() && grads[l.nr].defined() && grads[l.nr].is_cuda()) {
      l.call->cuda_device = grads[l.nr].device();
      l.call->mem_before = memory;
    }
    l.call->started = true;
    l.call->start = enter;
    any_started = true;
    entered = l.call.get();
  }
  for (Listener& l : node.listeners) {
    if (l.role != Listener::Role::kInput || l.call->epoch != epoch_ || !l.call->started) continue;
    BackwardCall& bc = *l.call;
    BackwardSample sample = StartedSample(bc, enter);
    const SlotGradStats& in = stats_for(l.nr);
    if (in.ready) {
      sample.grad_in_norm = in.ready->norm;
      sample.grad_in_mean = in.ready->mean;
      sample.grad_in_has_nan = in.ready->has_nan;
    }
    SetMemoryDelta(bc.mem_before, memory, &sample);
    bc.started = false;
    FlightSpan(bc, enter, NonFiniteFlag(sample.grad_has_nan || sample.grad_in_has_nan));
    left = &bc;
    if (bc.out_stats != nullptr || in.deferred != nullptr) {
      DeferBackward(bc, std::move(sample), in.deferred);
    } else {
      AddBackwardSample(bc.layer, bc.step, sample);
    }
  }
  if (recorder_ != nullptr && (entered != nullptr || left != nullptr)) {
    const BackwardCall& at = entered != nullptr ? *entered : *left;
    recorder_->Move(flight::Phase::kBackward,
                    entered != nullptr ? flight::Event::kEnter : flight::Event::kExit, at.layer,
                    static_cast<uint64_t>(at.step), Ns(enter));
  }
  if (any_started) {
    // Our own work in this hook is not part of the layers' backward time.
    const Clock::time_point exit = Clock::now();
    for (Listener& l : node.listeners) {
      if (l.role == Listener::Role::kOutput && l.call->epoch == epoch_ && l.call->started) {
        l.call->start = exit;
      }
    }
  }
}

std::optional<c10::Device> Tracer::NodeDoneDevice(const NodeListeners& node) const {
  for (const Listener& l : node.listeners) {
    const BackwardCall& bc = *l.call;
    if (l.role == Listener::Role::kOutput && bc.epoch == epoch_ && !bc.has_input_edge &&
        bc.started && bc.cuda_device) {
      return bc.cuda_device;
    }
  }
  return std::nullopt;
}

void Tracer::OnNodeDone(NodeListeners& node) {
  const Clock::time_point end = Clock::now();
  if (ForkedChild() || !recording_.load(std::memory_order_acquire)) return;
  guest::GuardHook(errors_, "node_done", [&] {
    std::optional<c10::Device> device;
    {
      absl::MutexLock lock(&mu_);
      if (!active_) return;
      device = NodeDoneDevice(node);
      if (!device) {  // No device memory to read: done in this one lock.
        NodeDoneLocked(node, std::nullopt, end);
        return;
      }
    }
    const std::optional<DeviceMemory> memory = SampleDeviceMemory(*device);
    absl::MutexLock lock(&mu_);
    if (!active_) return;
    NodeDoneLocked(node, memory, end);
  });
}

void Tracer::NodeDoneLocked(NodeListeners& node, const std::optional<DeviceMemory>& memory,
                            Clock::time_point end) {
  for (Listener& l : node.listeners) {
    BackwardCall& bc = *l.call;
    if (l.role != Listener::Role::kOutput || bc.epoch != epoch_ || bc.has_input_edge ||
        !bc.started) {
      continue;
    }
    BackwardSample sample = StartedSample(bc, end);
    SetMemoryDelta(bc.mem_before, memory, &sample);
    bc.started = false;
    FlightSpan(bc, end, NonFiniteFlag(sample.grad_has_nan));
    if (recorder_ != nullptr) {
      recorder_->Move(flight::Phase::kBackward, flight::Event::kExit, bc.layer,
                      static_cast<uint64_t>(bc.step), Ns(end));
    }
    if (bc.out_stats != nullptr) {
      DeferBackward(bc, std::move(sample), nullptr);
    } else {
      AddBackwardSample(bc.layer, bc.step, sample);
    }
  }
}

void Tracer::FlightSpan(const BackwardCall& bc, Clock::time_point end, uint32_t flags) {
  if (recorder_ == nullptr) return;
  recorder_->Span(flight::SpanKind::kBackward, bc.layer, static_cast<uint64_t>(bc.step),
                  Ns(bc.start), std::max<int64_t>(0, Ns(end) - Ns(bc.start)), flags);
}

void Tracer::DetachHooks() {
  for (auto& [key, weak_state] : nodes_) {
    std::shared_ptr<NodeListeners> state = weak_state.lock();
    if (state == nullptr) continue;
    NodePtr node = state->node.lock();
    if (node == nullptr) continue;
    auto& pre = node->pre_hooks();
    pre.erase(std::remove_if(pre.begin(), pre.end(),
                             [&](const std::unique_ptr<FunctionPreHook>& h) {
                               auto* ours = dynamic_cast<PreHook*>(h.get());
                               return ours != nullptr && ours->state() == state.get();
                             }),
              pre.end());
    auto& post = node->post_hooks();
    post.erase(std::remove_if(post.begin(), post.end(),
                              [&](const std::unique_ptr<FunctionPostHook>& h) {
                                auto* ours = dynamic_cast<PostHook*>(h.get());
                                return ours != nullptr && ours->state() == state.get();
                              }),
               post.end());
  }
  nodes_.clear();
  prune_nodes_at_ = kMinNodePrune;
}

}  // namespace tracetorch::agent
