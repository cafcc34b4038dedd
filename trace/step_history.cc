#include "trace/step_history.h"

namespace tracetorch {

const LayerSteps* StepHistory::Find(std::string_view full_name) const {
  for (const LayerSteps& l : layers) {
    if (l.full_name == full_name) return &l;
  }
  return nullptr;
}

}  // namespace tracetorch
