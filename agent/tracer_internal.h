// Private to the Tracer (agent/tracer.h): the backward bookkeeping shared by its forward path
// (tracer.cc, which registers a call's backward at EndCall) and its autograd hooks
// (tracer_backward.cc), and the small helpers both use. Not part of the agent's API.
//
// Thread-safety: every field below is guarded by the owning Tracer's mu_; they are only touched
// in its methods, which hold it.
#ifndef TRACETORCH_AGENT_TRACER_INTERNAL_H_
#define TRACETORCH_AGENT_TRACER_INTERNAL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "agent/cuda_support.h"
#include "agent/deferred_stats.h"
#include "agent/stats.h"
#include "agent/tracer.h"

namespace torch::autograd {
struct Node;
}

namespace tracetorch::agent {

// One forward call's backward: started by the gradient of its output, ended by the gradient at its
// input (or by the output's node finishing when no input needs a gradient).
struct BackwardCall {
  Tracer::LayerId layer = Tracer::kNoLayer;
  int64_t step = 0;  // Of the forward call.
  uint64_t epoch = 0;
  bool has_input_edge = false;
  std::weak_ptr<NodeListeners> output_node;  // Expired: no further backward can start.
  bool started = false;
  std::chrono::steady_clock::time_point start;
  std::optional<GradStats> out;
  std::shared_ptr<DeferredStats> out_stats;  // Instead of `out`: still on the device.
  std::optional<c10::Device> cuda_device;
  std::optional<DeviceMemory> mem_before;  // CUDA only.
};

struct Listener {
  enum class Role : uint8_t { kOutput, kInput };
  Role role = Role::kOutput;
  uint32_t nr = 0;  // Index of the gradient in the node's inputs.
  std::shared_ptr<BackwardCall> call;
};

// The calls listening on one autograd node; our pre-hook (and post-hook, when a call ends there)
// on the node holds it.
struct NodeListeners {
  // The node is given at construction: torch >= 2.15's weak pointer has no empty state.
  explicit NodeListeners(WeakNodePtr n) : node(std::move(n)) {}
  WeakNodePtr node;
  std::vector<Listener> listeners;
  bool has_post_hook = false;
};

namespace tracer_internal {

// The size of the node map at which expired entries are first pruned (and its floor after).
inline constexpr size_t kMinNodePrune = 4096;

inline double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// A steady_clock time as the flight recorder's CLOCK_MONOTONIC nanoseconds (the same clock on
// Linux).
inline int64_t Ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// With statistics off only the counts were computed: they go beside the (absent) statistics.
inline void Attach(const TensorStats& stats, StatsMode mode, TensorInfo* info) {
  if (mode == StatsMode::kFull) {
    info->stats = stats;
  } else {
    info->nonfinite = NonFiniteCounts{.nan_count = stats.nan_count, .inf_count = stats.inf_count};
  }
}

// Fills the sample's memory deltas from `before` and `after`, both sampled (on one device)
// before the Tracer's lock was taken (CUDA only; a no-op when either is missing).
template <typename Sample>
void SetMemoryDelta(const std::optional<DeviceMemory>& before,
                    const std::optional<DeviceMemory>& after, Sample* sample) {
  if (!before || !after) return;
  sample->mem_alloc_delta = after->allocated - before->allocated;
  sample->mem_reserved_delta = after->reserved - before->reserved;
}

}  // namespace tracer_internal
}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_TRACER_INTERNAL_H_
