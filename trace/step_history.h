// Per-step values of a run's layers: what tracetorchd keeps for each session and each baseline made
// from one (service.proto LayerHistory; protocol/record_proto.h converts), for the charts of
// `tracetorch report` and the TensorBoard export. A trace file holds none.
//
// Plain structs with value semantics; not synchronised.
#ifndef TRACETORCH_TRACE_STEP_HISTORY_H_
#define TRACETORCH_TRACE_STEP_HISTORY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tracetorch {

// One layer's values, oldest first, `steps` strictly increasing (the daemon thins older steps, so
// they need not be consecutive). The value vectors are parallel to `steps`; a value not measured
// in that step is NaN. `non_finite[i]`: the layer's output or gradient held NaN/Inf in step i
// (a shorter vector reads as false).
struct LayerSteps {
  std::string full_name = "";
  std::vector<uint64_t> steps = {};
  std::vector<double> latency_ms = {};  // Forward, latest call of the step.
  std::vector<double> output_std = {};  // First output.
  std::vector<double> grad_norm = {};   // Gradient of the first output.
  std::vector<bool> non_finite = {};
};

struct StepHistory {
  std::vector<LayerSteps> layers;  // At most one per full_name.

  bool empty() const { return layers.empty(); }
  // The layer's steps, or nullptr. Linear scan.
  const LayerSteps* Find(std::string_view full_name) const;
};

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_STEP_HISTORY_H_
