#include "agent/python/bind_ops.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/ops/op_recorder.h"
#include "agent/python/status_translate.h"
#include "trace/op_graph_json.h"
#include "trace/op_select.h"

namespace tracetorch::python {
namespace {

namespace py = pybind11;

OpSelector ParseOrThrow(const std::string& text) {
  absl::StatusOr<OpSelector> s = OpSelector::Parse(text);
  if (!s.ok()) ThrowStatus(s.status());
  return *std::move(s);
}

// The recorder and the Python function it may call (kept alive with it).
class PyOpRecorder {
 public:
  PyOpRecorder(std::optional<std::string> save, bool stats, const std::vector<std::string>& sites,
               py::object intervene, bool script_modules)
      : intervene_(std::move(intervene)) {
    ops::OpRecorderOptions options;
    options.script_modules = script_modules;
    options.save = save ? ParseOrThrow(*save) : OpSelector::None();
    options.stats = stats;
    for (const std::string& s : sites) options.intervene_sites.push_back(ParseOrThrow(s));
    if (!intervene_.is_none()) {
      PyObject* fn = intervene_.ptr();  // Owned by intervene_, which outlives the recorder.
      options.intervene = [fn](int32_t site, const at::Tensor& out) -> at::Tensor {
        py::gil_scoped_acquire gil;
        try {
          py::object r = py::reinterpret_borrow<py::object>(fn)(site, out);
          if (r.is_none()) return at::Tensor();
          return r.cast<at::Tensor>();
        } catch (py::error_already_set& e) {
          throw std::runtime_error(e.what());
        } catch (const py::cast_error& e) {
          throw std::runtime_error(std::string("the intervention must return a Tensor or None: ") +
                                   e.what());
        }
      };
    }
    recorder_ = std::make_unique<ops::OpRecorder>(std::move(options));
  }
  ~PyOpRecorder() { recorder_.reset(); }  // Before intervene_.

  ops::OpRecorder& r() { return *recorder_; }

 private:
  py::object intervene_;
  std::unique_ptr<ops::OpRecorder> recorder_;
};

}  // namespace

void BindOps(py::module_& m) {
  py::class_<OpGraph>(m, "_OpGraph")
      .def(
          "to_json", [](const OpGraph& g, int indent) { return OpGraphToJson(g, indent); },
          py::arg("indent") = 1)
      .def("write",
           [](const OpGraph& g, const std::string& path) {
             if (absl::Status s = WriteOpGraphFile(path, g); !s.ok()) ThrowStatus(s, path);
           })
      .def("select", [](const OpGraph& g, const std::string& selector) {
        const OpSelector s = ParseOrThrow(selector);
        std::vector<int32_t> out;
        for (size_t i = 0; i < g.ops.size(); ++i) {
          if (s.Matches(g, static_cast<int32_t>(i))) out.push_back(static_cast<int32_t>(i));
        }
        return out;
      });
  m.def("_read_op_graph", [](const std::string& path) {
    absl::StatusOr<OpGraph> g = ReadOpGraphFile(path);
    if (!g.ok()) ThrowStatus(g.status());
    return *std::move(g);
  });
  m.def("_parse_op_graph", [](const std::string& text) {
    absl::StatusOr<OpGraph> g = ParseOpGraphJson(text);
    if (!g.ok()) ThrowStatus(g.status());
    return *std::move(g);
  });
  m.def("_parse_selector", [](const std::string& text) { return ParseOrThrow(text).ToString(); });

  py::class_<PyOpRecorder>(m, "_OpRecorder")
      .def(py::init<std::optional<std::string>, bool, const std::vector<std::string>&, py::object,
                    bool>(),
           py::arg("save"), py::arg("stats"), py::arg("sites"), py::arg("intervene"),
           py::arg("script_modules") = false)
      .def("set_model",
           [](PyOpRecorder& self, const std::string& name, const std::string& source) {
             self.r().mutable_graph().model_name = name;
             self.r().mutable_graph().source = source;
           })
      .def("add_input", [](PyOpRecorder& self, std::string name,
                           const at::Tensor& t) { self.r().AddInput(std::move(name), t); })
      .def("add_parameter", [](PyOpRecorder& self, std::string name, const at::Tensor& t,
                               bool buffer) { self.r().AddParameter(std::move(name), t, buffer); })
      .def("start",
           [](PyOpRecorder& self) {
             if (absl::Status s = self.r().Start(); !s.ok()) ThrowStatus(s);
           })
      .def("stop", [](PyOpRecorder& self) { self.r().Stop(); })
      .def("push_module",
           [](PyOpRecorder& self, const std::string& path, const std::string& type,
              const std::vector<at::Tensor>& inputs,
              int64_t params) { return self.r().PushModule(path, type, inputs, params); })
      .def("pop_module",
           [](PyOpRecorder& self, int32_t pass, const std::vector<at::Tensor>& outputs) {
             self.r().PopModule(pass, outputs);
           })
      .def("set_outputs",
           [](PyOpRecorder& self, const std::vector<at::Tensor>& outputs) {
             self.r().SetOutputs(outputs);
           })
      .def("graph", [](PyOpRecorder& self) { return self.r().graph(); })
      .def("saved",
           [](PyOpRecorder& self, int32_t op) {
             py::list out;
             for (const at::Tensor& t : self.r().saved(op)) {
               if (t.defined()) {
                 out.append(py::cast(t));
               } else {
                 out.append(py::none());
               }
             }
             return out;
           })
      .def("saved_all",
           [](PyOpRecorder& self) {
             py::dict out;
             const OpGraph& g = self.r().graph();
             for (size_t i = 0; i < g.ops.size(); ++i) {
               if (!g.ops[i].saved) continue;
               py::list tensors;
               for (const at::Tensor& t : self.r().saved(static_cast<int32_t>(i))) {
                 tensors.append(t.defined() ? py::cast(t) : py::none());
               }
               out[py::int_(i)] = tensors;
             }
             return out;
           })
      .def_property_readonly("hook_errors",
                             [](PyOpRecorder& self) { return self.r().hook_errors(); })
      .def_property_readonly("first_error",
                             [](PyOpRecorder& self) { return self.r().first_error(); });
}

}  // namespace tracetorch::python
