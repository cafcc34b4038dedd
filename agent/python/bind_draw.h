// Bindings of the pictures and the graph audit of op graphs (draw/op_graph_dot.h,
// trace/op_audit.h), for OpTrace.draw and OpTrace.audit. Private API:
//
//   _draw_op_graph(graph: _OpGraph, collapse: str, module: str, file_format: str,
//                  direction: str, path: str | None) -> bytes
//       The rendered picture; written atomically to `path` too when given. ValueError for an
//       unknown collapse / format / direction or module, OSError for a file that cannot be
//       written (status_translate.h). Graphviz runs without the GIL.
//   _audit_op_graph(graph: _OpGraph) -> str   OpAuditToJson of AuditOpGraph (one line).
//   _is_activation(func_name: str) -> bool    IsActivation.
//
// REQUIRES: the GIL is held for every call (pybind11 does); _OpGraph registered (bind_ops.h).
#ifndef TRACETORCH_AGENT_PYTHON_BIND_DRAW_H_
#define TRACETORCH_AGENT_PYTHON_BIND_DRAW_H_

#include <pybind11/pybind11.h>

namespace tracetorch::python {

void BindDraw(pybind11::module_& m);

}  // namespace tracetorch::python

#endif  // TRACETORCH_AGENT_PYTHON_BIND_DRAW_H_
