// Aggregation of per-call layer observations into a TraceRecord.
//
// One reusable piece for every keeper of a trace: the agent's embedded mode feeds it from module
// hooks, the daemon feeds it from decoded wire events, and both must produce the same record for
// the same run. Memory is bounded by the number of declared layers, never by the number of steps:
// each layer keeps its latest tensors and running min/mean/max/count.
//
// Rules:
//  - Forward: latency_ms is the latest call; min/max/mean over all calls; forward_count counts
//  calls;
//    inputs/outputs are the latest call's; has_nan/has_inf become true once any output (or, for
//    NaN/Inf counts, any output's stats) held one and stay true; inf_in_masks_only is true while
//    every output that held an Inf was a mask (trace/nonfinite.h).
//  - Backward: the same for bwd_latency_*/backward_count; grad_* are the latest backward's values;
//    grad_has_nan, has_zero_grad and grad_in_has_nan stay true once seen.
//  - Memory deltas are the latest call's (nullopt when the sample has none).
//  - Snapshot() lists layers that completed at least one forward or backward, in the order of their
//    first forward (children complete before parents); layers only declared are omitted.
//
// Thread-safe: every method may be called from any thread.
#ifndef TRACETORCH_TRACE_AGGREGATOR_H_
#define TRACETORCH_TRACE_AGGREGATOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "trace/record.h"

namespace tracetorch {

// Static description of a layer, declared once per session.
struct LayerInfo {
  std::string name;
  std::string type;
  std::string full_name;
  int32_t depth = 0;
  int64_t params = 0;
};

// What one forward call of a layer produced.
struct ForwardSample {
  std::optional<double> latency_ms;  // nullopt when it could not be measured.
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  std::optional<int64_t> mem_alloc_delta;
  std::optional<int64_t> mem_reserved_delta;
  // Set by a keeper that skips the tensors of a sample a later sample of the same layer supersedes
  // (a record keeps only the latest call's tensors; the daemon does this within a batch). Then
  // inputs/outputs are ignored, the layer keeps the tensors it has, and `outputs_had_nan` /
  // `outputs_had_inf` / `outputs_inf_in_masks_only` carry the sample's non-finite facts in their
  // place (the last: every output holding an Inf was a mask, trace/nonfinite.h).
  bool tensors_omitted = false;
  bool outputs_had_nan = false;
  bool outputs_had_inf = false;
  bool outputs_inf_in_masks_only = false;
};

// What one backward pass through a layer produced.
struct BackwardSample {
  std::optional<double> latency_ms;
  std::optional<double> grad_norm;  // Of the gradient w.r.t. the layer's first output.
  std::optional<double> grad_mean;
  bool grad_has_nan = false;
  bool grad_all_zero = false;
  std::optional<double> grad_in_norm;  // Of the gradient w.r.t. the layer's first input.
  std::optional<double> grad_in_mean;
  bool grad_in_has_nan = false;
  std::optional<int64_t> mem_alloc_delta;
  std::optional<int64_t> mem_reserved_delta;
};

// Fold one latency into a lone layer's latest/min/max/mean and its count (forward_count,
// backward_count), as TraceAggregator does, taking the layer's mean as over all its counted calls:
// the library's LayerTrace.record_latency / record_backward_latency, for code that builds layers
// itself.
void RecordForwardLatency(double latency_ms, LayerTrace* layer);
void RecordBackwardLatency(double latency_ms, LayerTrace* layer);

class TraceAggregator {
 public:
  using LayerId = int32_t;

  explicit TraceAggregator(TraceMetadata metadata = {});
  TraceAggregator(const TraceAggregator&) = delete;
  TraceAggregator& operator=(const TraceAggregator&) = delete;

  // Declares a layer and returns its id (dense, starting at 0). Declaring a full_name again returns
  // the existing id (the info must match; InvalidArgument if the type differs).
  absl::StatusOr<LayerId> DeclareLayer(const LayerInfo& info) ABSL_LOCKS_EXCLUDED(mu_);

  // InvalidArgument if `id` was never declared.
  absl::Status AddForward(LayerId id, ForwardSample sample) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status AddBackward(LayerId id, const BackwardSample& sample) ABSL_LOCKS_EXCLUDED(mu_);

  // Holds the aggregator's lock for a run of additions (a keeper adding a batch of samples at once
  // takes the lock once, not once per sample). While one exists, call no other method of the
  // aggregator from the same thread.
  //
  //   TraceAggregator::Batch batch(&aggregator);
  //   for (...) batch.AddForward(id, std::move(sample));
  class ABSL_SCOPED_LOCKABLE Batch {
   public:
    explicit Batch(TraceAggregator* aggregator) ABSL_EXCLUSIVE_LOCK_FUNCTION(aggregator->mu_)
        : aggregator_(aggregator) {
      aggregator_->mu_.Lock();
    }
    ~Batch() ABSL_UNLOCK_FUNCTION() { aggregator_->mu_.Unlock(); }
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;

    // As TraceAggregator::AddForward / AddBackward.
    absl::Status AddForward(LayerId id, ForwardSample sample);
    absl::Status AddBackward(LayerId id, const BackwardSample& sample);
    // Layer `id`'s latest input and output tensors, to be replaced in place (their storage reused)
    // by a keeper that added a run of forward samples with tensors_omitted and decodes the last
    // one's tensors afterwards. Valid while this batch is held. InvalidArgument for an undeclared
    // id.
    struct LatestTensors {
      std::vector<TensorInfo>* inputs = nullptr;
      std::vector<TensorInfo>* outputs = nullptr;
    };
    absl::StatusOr<LatestTensors> MutableLatestTensors(LayerId id);

   private:
    TraceAggregator* const aggregator_;
  };

  void SetMetadata(TraceMetadata metadata) ABSL_LOCKS_EXCLUDED(mu_);
  TraceMetadata metadata() const ABSL_LOCKS_EXCLUDED(mu_);

  // The trace so far (see the rules above). `warnings` is left empty: run DetectAnomalies on it.
  TraceRecord Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  // Snapshot(), with `fill` called on each layer's copy (with the layer's id) before it is placed:
  // for a keeper that holds what it did not give the aggregator (e.g. the latest tensors, kept
  // encoded until a record is made). `fill` must not call into this aggregator.
  TraceRecord SnapshotWith(absl::FunctionRef<void(LayerId, LayerTrace*)> fill) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Forgets every observation but keeps declared layers and metadata (a new `with` block).
  void ResetObservations() ABSL_LOCKS_EXCLUDED(mu_);

  int32_t declared_layers() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct LayerState {
    LayerTrace trace;
    double latency_sum = 0;  // Over calls that had a latency.
    int64_t latency_samples = 0;
    double bwd_latency_sum = 0;
    int64_t bwd_latency_samples = 0;
    int64_t first_seen = -1;  // Order of first forward (or backward); -1 = never observed.
  };

  absl::Status AddForwardLocked(LayerId id, ForwardSample sample)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AddBackwardLocked(LayerId id, const BackwardSample& sample)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  TraceMetadata metadata_ ABSL_GUARDED_BY(mu_);
  std::vector<LayerState> layers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, LayerId> ids_by_name_ ABSL_GUARDED_BY(mu_);
  int64_t next_seen_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_AGGREGATOR_H_
