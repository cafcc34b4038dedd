// Selectors: small combinable predicates over the ops of a forward pass, with one meaning
// whether they run while capturing (what to save, where to intervene) or afterwards (which ops to
// list, draw or audit).
//
//   OpSelector::Func("conv2d")       ops of that function; "relu" also matches the in-place
//                                    "relu_" (func names are compared without a namespace)
//   OpSelector::Module("layer3")     the op whose output is the output of a pass of layer3
//                                    ("layer3:2": of its second pass only)
//   OpSelector::InModule("layer2")   every op run inside a pass of layer2, nested ones too
//                                    ("layer2:1": inside its first pass only)
//   OpSelector::Label("relu_1_3")    that op
//   a | b, a & b, ~a                 union, intersection, complement
//
// A selector sees an op through an OpSite: its func name, label, the module passes around it and
// the passes whose output it is. While capturing, the engine fills `output_of` when a module pass
// ends (its output ops are known then), so Module(...) selects at that moment; everything else
// selects when the op ends.
//
// Value type; immutable after construction; thread-safe to share. C++17 (installed header).
#ifndef TRACETORCH_TRACE_OP_SELECT_H_
#define TRACETORCH_TRACE_OP_SELECT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "trace/op_graph.h"

namespace tracetorch {

// One module pass as a selector sees it.
struct SiteModule {
  std::string_view path;  // "layer3.1"
  int32_t pass = 1;
};

// One op as a selector sees it. Views into storage the caller keeps alive during Matches().
struct OpSite {
  std::string_view func_name;
  std::string_view label;
  std::vector<SiteModule> enclosing;  // Every pass around the op, outermost first.
  std::vector<SiteModule> output_of;  // Passes whose output the op produced.
};

// The site of graph.ops[op] (enclosing and output_of from the graph's module passes).
OpSite SiteOf(const OpGraph& graph, int32_t op);

class OpSelector {
 public:
  static OpSelector All();
  static OpSelector None();
  static OpSelector Func(std::string_view name);
  static OpSelector Module(std::string_view address);
  static OpSelector InModule(std::string_view address);
  static OpSelector Label(std::string_view label);

  // Parses the printed form (ToString()): func('conv2d') & ~in_module('layer2') | label('x_1_1'),
  // with the usual precedence (~ over & over |) and parentheses; all / none. InvalidArgument with
  // the position of what does not parse.
  static absl::StatusOr<OpSelector> Parse(std::string_view text);

  friend OpSelector operator|(const OpSelector& a, const OpSelector& b);
  friend OpSelector operator&(const OpSelector& a, const OpSelector& b);
  friend OpSelector operator~(const OpSelector& a);

  bool Matches(const OpSite& site) const;
  bool Matches(const OpGraph& graph, int32_t op) const { return Matches(SiteOf(graph, op)); }

  // True when the selector can match only through `output_of` (Module(...) and combinations that
  // need it): the capture engine then decides at the end of module passes.
  bool NeedsModuleOutputs() const;

  // "func('conv2d') | module('layer3')"; Parse(ToString()) gives an equal selector.
  std::string ToString() const;

  struct Node;  // The expression tree; an implementation detail.

 private:
  explicit OpSelector(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  std::shared_ptr<const Node> node_;
};

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_OP_SELECT_H_
