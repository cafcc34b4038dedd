#include "agent/python/bind_draw.h"

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "agent/python/status_translate.h"
#include "draw/op_graph_dot.h"
#include "trace/atomic_file.h"
#include "trace/op_audit.h"
#include "trace/op_graph.h"

namespace tracetorch::python {
namespace {

namespace py = pybind11;

template <typename T>
T OrThrow(absl::StatusOr<T> v) {
  if (!v.ok()) ThrowStatus(v.status());
  return *std::move(v);
}

}  // namespace

void BindDraw(py::module_& m) {
  // `file_format` "": from `path`'s extension, else svg (draw::ResolveDrawFormat).
  m.def(
      "_draw_op_graph",
      [](const OpGraph& graph, const std::string& collapse, const std::string& module,
         const std::string& file_format, const std::string& direction,
         std::optional<std::string> path) {
        draw::DrawOptions options;
        options.view.collapse = OrThrow(draw::ParseCollapse(collapse));
        options.view.module = module;
        options.format = OrThrow(draw::ResolveDrawFormat(file_format, path.value_or("")));
        options.direction = OrThrow(draw::ParseDirection(direction));
        absl::StatusOr<std::string> bytes;
        absl::Status written;
        {
          py::gil_scoped_release release;
          bytes = draw::DrawOpGraph(graph, options);
          if (bytes.ok() && path) written = WriteFileAtomic(*path, *bytes);
        }
        if (!bytes.ok()) ThrowStatus(bytes.status());
        if (!written.ok()) ThrowStatus(written, *path);
        // Text formats come back as str, binary ones as bytes.
        if (draw::IsBinaryFormat(options.format)) return py::object(py::bytes(*bytes));
        return py::object(py::str(*bytes));
      },
      py::arg("graph"), py::arg("collapse"), py::arg("module"), py::arg("file_format"),
      py::arg("direction"), py::arg("path") = py::none());
  m.def("_audit_op_graph",
        [](const OpGraph& graph) { return OpAuditToJson(AuditOpGraph(graph), 0); });
  m.def("_is_activation", [](const std::string& func_name) { return IsActivation(func_name); });
}

}  // namespace tracetorch::python
