// How the agent holds an autograd node: the pointer type torch's own Edge uses. torch <= 2.14 holds
// nodes in std::shared_ptr, torch >= 2.15 in c10::intrusive_ptr; the agent names neither.
//
//   NodePtr      a strong reference (what Edge::function is)
//   WeakNodePtr  a weak one: WeakNodePtr(strong) makes it, .lock() gives a NodePtr or null,
//                .expired() says whether the node is gone
//
// Thread safety: as the pointer types themselves (copies on several threads are fine).
#ifndef TRACETORCH_AGENT_AUTOGRAD_NODE_H_
#define TRACETORCH_AGENT_AUTOGRAD_NODE_H_

#include <c10/util/intrusive_ptr.h>
#include <torch/version.h>
// Edge declares the pointer. From torch 2.15 (c10::intrusive_ptr) edge.h compiles only with Node
// complete, which function.h gives; before, edge.h alone (a far lighter header) is enough.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 15)
#include <torch/csrc/autograd/function.h>
#else
#include <torch/csrc/autograd/edge.h>
#endif

#include <memory>

namespace tracetorch::agent {

using NodePtr = decltype(torch::autograd::Edge::function);

namespace autograd_node_internal {
template <typename Strong>
struct Weak;
template <typename T>
struct Weak<std::shared_ptr<T>> {
  using type = std::weak_ptr<T>;
};
template <typename T>
struct Weak<c10::intrusive_ptr<T>> {
  using type = c10::weak_intrusive_ptr<T>;
};
}  // namespace autograd_node_internal

using WeakNodePtr = typename autograd_node_internal::Weak<NodePtr>::type;

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_AUTOGRAD_NODE_H_
