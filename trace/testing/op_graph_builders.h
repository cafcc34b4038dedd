// Builders for trace/op_graph.h values in tests. Header-only.
#ifndef TRACETORCH_TRACE_TESTING_OP_GRAPH_BUILDERS_H_
#define TRACETORCH_TRACE_TESTING_OP_GRAPH_BUILDERS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "trace/op_graph.h"

namespace tracetorch::testing {

// A module pass: `path` ("block"), its class `type`, its 1-based `pass` number and the index of
// its `parent` pass (-1 for the root).
inline ModulePass Pass(std::string path, std::string type, int32_t pass, int32_t parent) {
  ModulePass m;
  m.path = std::move(path);
  m.type = std::move(type);
  m.pass = pass;
  m.parent = parent;
  return m;
}

}  // namespace tracetorch::testing

#endif  // TRACETORCH_TRACE_TESTING_OP_GRAPH_BUILDERS_H_
