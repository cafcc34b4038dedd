// A small resnet-like op graph for the draw/ tests. Header-only.
#ifndef TRACETORCH_DRAW_TESTING_NET_GRAPH_H_
#define TRACETORCH_DRAW_TESTING_NET_GRAPH_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trace/op_graph.h"
#include "trace/testing/op_graph_builders.h"

namespace tracetorch::draw::testing_net {

using tracetorch::testing::Pass;

inline OpSource FromOp(int32_t i) { return OpSource{OpSource::Kind::kOp, i, 0}; }

// A small resnet: conv1, layer1 = two identical BasicBlocks (conv1, relu, conv2, then a residual
// add in the block's own forward), a flatten at the root, fc.
class NetBuilder {
 public:
  NetBuilder() {
    g.model_name = "Net";
    g.inputs.push_back({"x", TensorInfo{{1, 8, 4, 4}, "torch.float32", "cpu", std::nullopt}});
    g.modules = {Pass("", "Net", 1, -1),                  // 0
                 Pass("conv1", "Conv2d", 1, 0),           // 1
                 Pass("layer1", "Sequential", 1, 0),      // 2
                 Pass("layer1.0", "BasicBlock", 1, 2),    // 3
                 Pass("layer1.0.conv1", "Conv2d", 1, 3),  // 4
                 Pass("layer1.0.relu", "ReLU", 1, 3),     // 5
                 Pass("layer1.0.conv2", "Conv2d", 1, 3),  // 6
                 Pass("layer1.1", "BasicBlock", 1, 2),    // 7
                 Pass("layer1.1.conv1", "Conv2d", 1, 7),  // 8
                 Pass("layer1.1.relu", "ReLU", 1, 7),     // 9
                 Pass("layer1.1.conv2", "Conv2d", 1, 7),  // 10
                 Pass("fc", "Linear", 1, 0)};             // 11
    Op("conv2d", 1, {{OpSource::Kind::kInput, 0, 0}});    // 0
    Block(3, 0);                                          // 1..4
    Block(7, 4);                                          // 5..8
    Op("flatten", 0, {FromOp(8)}, {1, 128});              // 9
    Op("linear", 11, {FromOp(9)}, {1, 10});               // 10
    Range(0, 0, 10);
    Range(1, 0, 0);
    Range(2, 1, 8);
    Range(11, 10, 10);
    g.modules[2].inputs = {FromOp(0)};
    g.modules[2].outputs = {FromOp(8)};
    g.outputs = {FromOp(10)};
    LinkChildren(g);
  }

  OpGraph g;

 private:
  void Op(const std::string& func, int32_t pass, std::vector<OpSource> inputs,
          std::vector<int64_t> shape = {1, 8, 4, 4}) {
    OpNode n;
    n.func_name = func;
    n.op_name = "aten::" + func;
    n.index = static_cast<int32_t>(g.ops.size()) + 1;
    n.call_index = ++calls_[func];
    n.label = OpLabel(func, n.call_index, n.index);
    n.module_pass = pass;
    for (const OpSource& s : inputs) {
      OpInput in;
      in.source = s;
      in.tensor.shape = s.kind == OpSource::Kind::kOp ? g.ops[s.index].outputs[0].shape
                                                      : g.inputs[s.index].tensor.shape;
      n.inputs.push_back(in);
      if (s.kind == OpSource::Kind::kOp) n.parents.push_back(s.index);
    }
    n.outputs.push_back(
        TensorInfo{shape, "torch.float32", "cpu", TensorStats{0.5, 1.0, -1.0, 2.0, 0, 0}});
    g.ops.push_back(n);
  }
  void Range(int32_t pass, int32_t first, int32_t last) {
    g.modules[pass].first_op = first;
    g.modules[pass].last_op = last;
  }
  // A BasicBlock at `pass` (children pass+1..pass+3) fed by op `in`.
  void Block(int32_t pass, int32_t in) {
    const int32_t first = static_cast<int32_t>(g.ops.size());
    Op("conv2d", pass + 1, {FromOp(in)});
    Op("relu", pass + 2, {FromOp(first)});
    Op("conv2d", pass + 3, {FromOp(first + 1)});
    Op("add", pass, {FromOp(first + 2), FromOp(in)});
    Range(pass, first, first + 3);
    for (int32_t k = 0; k < 3; ++k) Range(pass + 1 + k, first + k, first + k);
    g.modules[pass].inputs = {FromOp(in)};
    g.modules[pass].outputs = {FromOp(first + 3)};
  }

  std::map<std::string, int32_t> calls_;
};

}  // namespace tracetorch::draw::testing_net

#endif  // TRACETORCH_DRAW_TESTING_NET_GRAPH_H_
