// Statistics of one tensor or gradient computed without a host synchronisation: ATen reductions
// on the tensor's own device (and current stream) into one small float64 tensor, copied
// non-blocking to pinned host memory on CUDA, and read once a CUDA event recorded after the copy
// has completed. The hook that launches them never waits; whoever collects the result later (the
// Tracer at the next step, Snapshot(), Stop()) checks Done() first.
//
//   absl::StatusOr<std::shared_ptr<DeferredStats>> d = DeferredStats::LaunchTensor(t, mode);
//   ...                                  // The device works on; the hook returns.
//   if ((*d)->Done()) use((*d)->Tensor());
//
// The reductions, for a tensor: over the finite elements (a mask, never a data-dependent
// masked_select, which would synchronise), their count, mean, second central moment, min and max;
// over all elements, the NaN and +-Inf counts. float16/bfloat16/float32 are reduced in float32
// with float64 sums, float64 in float64. For a gradient: the sum of squares (its norm), the sum
// (its mean), whether any element is NaN and whether any is non-zero, over all elements. The same
// code runs on the CPU, where the "copy" is the result itself and the result is complete at once:
// the Tracer's deferred CPU mode (TracerOptions::deferred_cpu) routes CPU tensors through it so
// that CI tests this path (stats_test.cc compares it with ComputeTensorStats).
//
// What is reduced: the dtypes of IsStatsDtype(), non-empty, strided. Other tensors are not
// launched (Launch* returns a result that is complete at once with the null statistics that
// ComputeTensorStats gives them).
//
// Errors: never throws; a libtorch error becomes Internal, an undefined tensor InvalidArgument.
//
// Thread-safety: Launch* may be called from any thread. A DeferredStats is shared by the results
// that refer to it (a tensor seen again in one forward); Done() and WaitUntil() may be called from
// any thread but not concurrently on one object (the Tracer calls them from its pending queue,
// which serialises them, or after taking the result out of it); Tensor()/Grad() are const and
// thread-safe once Done() returned true.
#ifndef TRACETORCH_AGENT_DEFERRED_STATS_H_
#define TRACETORCH_AGENT_DEFERRED_STATS_H_

#include <ATen/core/Tensor.h>

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/pending_results.h"
#include "agent/stats.h"
#include "trace/record.h"

namespace tracetorch::agent {

class DeferredStats {
 public:
  // Launches the reductions of a tensor's statistics (`mode` as in ComputeTensorStats).
  static absl::StatusOr<std::shared_ptr<DeferredStats>> LaunchTensor(const at::Tensor& tensor,
                                                                     StatsMode mode);
  // Launches the reductions of a gradient's statistics (as ComputeGradStats).
  static absl::StatusOr<std::shared_ptr<DeferredStats>> LaunchGrad(const at::Tensor& grad);

  DeferredStats(const DeferredStats&) = delete;
  DeferredStats& operator=(const DeferredStats&) = delete;

  // True once the values are on the host. Never blocks.
  bool Done();
  // Waits until Done() or `deadline` (Stop()'s bounded wait); returns Done().
  bool WaitUntil(absl::Time deadline);
  // REQUIRES: Done() returned true. The statistics, as ComputeTensorStats / ComputeGradStats.
  TensorStats Tensor() const;
  GradStats Grad() const;

 private:
  enum class Kind { kTensor, kGrad, kNone };
  DeferredStats(Kind kind, StatsMode mode) : kind_(kind), mode_(mode) {}

  const Kind kind_;
  const StatsMode mode_;
  int64_t numel_ = 0;                 // Of the tensor or gradient (a mean, the mask facts).
  at::Tensor host_;                   // float64 values, on the host (pinned on CUDA).
  std::unique_ptr<Completion> done_;  // Null: complete (a CPU result, or nothing launched).
};

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_DEFERRED_STATS_H_
