// Bindings of the op-level capture (agent/ops/op_recorder.h) and the op graph (trace/op_graph.h),
// for the `tracetorch.ops` module (tl.trace, tl.load). Private API: names start with "_".
//
//   _OpRecorder(save: str | None, stats: bool, sites: list[str], intervene: callable | None)
//       save / sites: selectors in their printed form (OpSelector::Parse; ValueError when they do
//       not parse); save None keeps nothing. intervene(site: int, output: Tensor) -> Tensor | None
//       is called with the GIL held and RecordFunction disabled; what it raises is kept
//       (first_error) and the output left as is.
//     .set_model(name, source), .add_input(name, t), .add_parameter(name, t, buffer)
//     .start() (RuntimeError when a capture is active on the thread), .stop()
//     .push_module(path, type, inputs, params) -> int, .pop_module(pass, outputs)
//     .set_outputs(tensors), .graph() -> _OpGraph (a copy), .saved(op) -> list[Tensor | None]
//     .hook_errors, .first_error
//   _OpGraph: .to_json(indent=1) -> str, .write(path), .select(selector) -> list[int] (op indexes)
//   _read_op_graph(path) -> _OpGraph, _parse_op_graph(text) -> _OpGraph,
//   _parse_selector(text) -> str (the canonical printed form)
//
// Errors raise through status_translate.h. The callbacks never raise into the traced forward.
// REQUIRES: the GIL is held for every call (pybind11 does).
#ifndef TRACETORCH_AGENT_PYTHON_BIND_OPS_H_
#define TRACETORCH_AGENT_PYTHON_BIND_OPS_H_

#include <pybind11/pybind11.h>

namespace tracetorch::python {

void BindOps(pybind11::module_& m);

}  // namespace tracetorch::python

#endif  // TRACETORCH_AGENT_PYTHON_BIND_OPS_H_
