#include "agent/python/record_convert.h"

#include <cstdint>
#include <utility>
#include <variant>

#include "absl/status/statusor.h"
#include "agent/python/status_translate.h"
#include "trace/json.h"

namespace tracetorch::python {

PyGlobals& Globals() {
  static PyGlobals* globals = new PyGlobals();
  return *globals;
}

void InitRecordConvert(py::module_& m) {
  PyGlobals& globals = Globals();
  py::module_ json = py::module_::import("json");
  globals.json_loads = py::object(json.attr("loads")).release();
  globals.json_dumps = py::object(json.attr("dumps")).release();
  globals.os_fspath = py::object(py::module_::import("os").attr("fspath")).release();
  globals.builtin_str = py::object(py::module_::import("builtins").attr("str")).release();

  py::object anomaly_severity = MakeStrEnum<AnomalySeverity>();
  py::object anomaly_type = MakeStrEnum<AnomalyType>();
  py::object diff_severity = MakeStrEnum<DiffSeverity>();
  py::object diff_kind = MakeStrEnum<DiffKind>();
  m.attr("AnomalySeverity") = anomaly_severity;
  m.attr("AnomalyType") = anomaly_type;
  m.attr("DiffSeverity") = diff_severity;
  m.attr("DiffKind") = diff_kind;
  globals.anomaly_severity = anomaly_severity.release();
  globals.anomaly_type = anomaly_type.release();
  globals.diff_severity = diff_severity.release();
  globals.diff_kind = diff_kind.release();
}

std::string FsPath(const py::handle& path) {
  py::object fs = Globals().os_fspath(path);
  if (!PyUnicode_Check(fs.ptr())) throw py::type_error("path must be a str or os.PathLike[str]");
  return fs.cast<std::string>();
}

// ---- JSON round trips ---------------------------------------------------------------------------

py::object JsonLoads(const std::string& text) { return Globals().json_loads(py::str(text)); }

py::object RecordToDict(const TraceRecord& record) {
  return JsonLoads(TraceToJson(record, JsonStyle{.indent = 0}));
}

// Parses `document` (a Python dict in the trace layout) with the C++ reader, so that a dict given
// by a user gets the same validation, defaults and error messages as a file. A value that is not
// JSON (a torch.device in the metadata) is taken as its str(), as the library's export does.
TraceRecord RecordFromPyDocument(const py::handle& document) {
  const std::string text = Globals()
                               .json_dumps(document, py::arg("default") = Globals().builtin_str)
                               .cast<std::string>();
  absl::StatusOr<TraceRecord> record = ParseTraceJson(text);
  if (!record.ok()) ThrowStatus(record.status());
  return *std::move(record);
}

py::dict Document(py::object metadata, py::list layers, py::list warnings) {
  py::dict doc;
  doc["metadata"] = std::move(metadata);
  doc["layers"] = std::move(layers);
  doc["warnings"] = std::move(warnings);
  return doc;
}

bool IsMapping(const py::handle& obj) {
  static PyObject* mapping = nullptr;  // collections.abc.Mapping; borrowed for the process life.
  if (mapping == nullptr) {
    mapping = py::object(py::module_::import("collections.abc").attr("Mapping")).release().ptr();
  }
  const int result = PyObject_IsInstance(obj.ptr(), mapping);
  if (result < 0) throw py::error_already_set();
  return result == 1;
}

// ---- details ------------------------------------------------------------------------------------

namespace {

py::object DetailToPy(const DetailValue& value) {
  struct Visitor {
    py::object operator()(std::monostate) const { return py::none(); }
    py::object operator()(bool b) const { return py::bool_(b); }
    py::object operator()(int64_t i) const { return py::int_(i); }
    py::object operator()(double d) const { return py::float_(d); }
    py::object operator()(const std::string& s) const { return py::str(s); }
    py::object operator()(const std::vector<std::string>& list) const {
      py::list out;
      for (const std::string& s : list) out.append(py::str(s));
      return out;
    }
  };
  return std::visit(Visitor{}, value);
}

DetailValue DetailFromPy(const py::handle& value, const std::string& key) {
  PyObject* obj = value.ptr();
  if (value.is_none()) return std::monostate{};
  if (PyBool_Check(obj)) return obj == Py_True;
  if (PyLong_Check(obj)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow != 0) throw py::value_error("details['" + key + "']: integer out of int64 range");
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return static_cast<int64_t>(v);
  }
  if (PyFloat_Check(obj)) return PyFloat_AsDouble(obj);
  if (PyUnicode_Check(obj)) return value.cast<std::string>();
  if (PyList_Check(obj) || PyTuple_Check(obj)) {
    std::vector<std::string> list;
    for (py::handle item : value) {
      if (!PyUnicode_Check(item.ptr())) {
        throw py::type_error("details['" + key + "']: a list value must hold only str");
      }
      list.push_back(item.cast<std::string>());
    }
    return list;
  }
  throw py::type_error("details['" + key + "']: unsupported value of type " +
                       std::string(Py_TYPE(obj)->tp_name) +
                       " (expected None, bool, int, float, str or list[str])");
}

}  // namespace

py::dict DetailsToPy(const Details& details) {
  py::dict out;
  for (const auto& [key, value] : details) out[py::str(key)] = DetailToPy(value);
  return out;
}

Details DetailsFromPy(const py::handle& obj) {
  Details details;
  if (obj.is_none()) return details;
  if (!IsMapping(obj)) throw py::type_error("details must be a dict or None");
  for (py::handle key : obj) {
    if (!PyUnicode_Check(key.ptr())) throw py::type_error("details keys must be str");
    const std::string name = key.cast<std::string>();
    details.emplace_back(name, DetailFromPy(obj[key], name));
  }
  return details;
}

// ---- Conversions from Python objects that may be dicts in the library's layout -----------------

TraceMetadata MetadataFromPy(const py::handle& obj) {
  if (py::isinstance<TraceMetadata>(obj)) return obj.cast<TraceMetadata>();
  if (obj.is_none()) return TraceMetadata{};
  if (!IsMapping(obj)) throw py::type_error("metadata must be a TraceMetadata or a dict");
  return RecordFromPyDocument(
             Document(py::reinterpret_borrow<py::object>(obj), py::list(), py::list()))
      .metadata;
}

LayerTrace LayerFromPy(const py::handle& obj) {
  if (py::isinstance<LayerTrace>(obj)) return obj.cast<LayerTrace>();
  if (!IsMapping(obj)) throw py::type_error("a layer must be a LayerTrace or a dict");
  py::list layers;
  layers.append(obj);
  return RecordFromPyDocument(Document(py::dict(), layers, py::list())).layers.at(0);
}

Anomaly AnomalyFromPy(const py::handle& obj) {
  if (py::isinstance<Anomaly>(obj)) return obj.cast<Anomaly>();
  if (!IsMapping(obj)) throw py::type_error("a warning must be an Anomaly or a dict");
  py::list warnings;
  warnings.append(obj);
  return RecordFromPyDocument(Document(py::dict(), py::list(), warnings)).warnings.at(0);
}

// ---- to_dict of the parts, through the writer ---------------------------------------------------

py::object MetadataToDict(const TraceMetadata& metadata) {
  TraceRecord record;
  record.metadata = metadata;
  return RecordToDict(record)["metadata"];
}

py::object LayerToDict(const LayerTrace& layer) {
  TraceRecord record;
  record.layers.push_back(layer);
  return RecordToDict(record)["layers"][py::int_(0)];
}

py::object TensorToDict(const TensorInfo& tensor) {
  TraceRecord record;
  record.layers.emplace_back().outputs.push_back(tensor);
  return RecordToDict(record)["layers"][py::int_(0)]["outputs"][py::int_(0)];
}

py::object AnomalyToDict(const Anomaly& anomaly) {
  TraceRecord record;
  record.warnings.push_back(anomaly);
  return RecordToDict(record)["warnings"][py::int_(0)];
}

py::object DiffToDict(const TraceDiff& diff) {
  return JsonLoads(DiffToJson(diff, JsonStyle{.indent = 0}));
}

py::object DiffEntryToDict(const DiffEntry& entry) {
  TraceDiff diff;
  diff.entries.push_back(entry);
  return DiffToDict(diff)["entries"][py::int_(0)];
}

std::string Repr(const py::handle& value) { return py::repr(value).cast<std::string>(); }

}  // namespace tracetorch::python
