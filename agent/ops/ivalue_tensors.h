// The tensors an operator argument or result holds: one tensor, a tensor list, or the tensors of a
// generic list (other elements skipped). Shared by the op recorder and the libtorch door's capture
// engine, which read RecordFunction inputs and outputs the same way. Header-only; no state.
#ifndef TRACETORCH_AGENT_OPS_IVALUE_TENSORS_H_
#define TRACETORCH_AGENT_OPS_IVALUE_TENSORS_H_

#include <ATen/core/ivalue.h>

namespace tracetorch::ops {

// Calls fn(const at::Tensor&) for each tensor `v` holds, in order.
template <typename Fn>
void ForEachTensor(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) {
    fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec()) fn(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor()) fn(e.toTensor());
    }
  }
}

}  // namespace tracetorch::ops

#endif  // TRACETORCH_AGENT_OPS_IVALUE_TENSORS_H_
