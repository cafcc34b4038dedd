// Conversions between the trace data model (trace/record.h, anomaly.h, diff.h) and Python, shared
// by the record bindings (bind_record.cc) and the analysis bindings (bind_analysis.cc). Private to
// the `tracetorch._C` extension:
//  - the StrEnum classes (AnomalySeverity, ...) and the pybind11 type casters that convert them (or
//    a plain str) to and from the C++ enums; this header must be included wherever such a value
//    crosses into Python;
//  - the JSON round trips behind to_dict() and the dict constructors: both go through the C++
//    writer and reader (trace/json.h), so there is one definition of the layout and its checks;
//  - the `details` values of anomalies and diff entries;
//  - what every bound class shares: value semantics, keyword construction, mapping access.
// Conversions raise Python exceptions (TypeError, ValueError; Status errors through
// status_translate.h).
//
// REQUIRES: InitRecordConvert(m) ran once (BindRecord calls it first), and the GIL is held.
#ifndef TRACETORCH_AGENT_PYTHON_RECORD_CONVERT_H_
#define TRACETORCH_AGENT_PYTHON_RECORD_CONVERT_H_

#include <pybind11/operators.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "trace/anomaly.h"
#include "trace/diff.h"
#include "trace/record.h"

namespace tracetorch::python {

namespace py = pybind11;

// Python objects created once by InitRecordConvert and deliberately never released: they must
// outlive every binding call, and a static py::object destructor would run after the interpreter is
// gone.
struct PyGlobals {
  py::handle json_loads;
  py::handle json_dumps;
  py::handle os_fspath;
  py::handle builtin_str;  // str, for json.dumps(default=str).
  py::handle anomaly_severity;
  py::handle anomaly_type;
  py::handle diff_severity;
  py::handle diff_kind;
};
// absl::StrCat here does not take std::string_view (Debian's absl has its own string_view).
inline std::string Str(std::string_view text) { return std::string(text); }

PyGlobals& Globals();

// Imports json and os, creates the four StrEnum classes and sets them on `m`.
void InitRecordConvert(py::module_& m);

// ---- Enum tables -------------------------------------------------------------------------------

template <typename E>
struct EnumInfo;
template <>
struct EnumInfo<AnomalySeverity> {
  static constexpr const char* kName = "AnomalySeverity";
  static constexpr std::array kValues = {AnomalySeverity::kInfo, AnomalySeverity::kWarning,
                                         AnomalySeverity::kCritical};
  static py::handle Class() { return Globals().anomaly_severity; }
};
template <>
struct EnumInfo<AnomalyType> {
  static constexpr const char* kName = "AnomalyType";
  static constexpr std::array kValues = {
      AnomalyType::kNanActivation,     AnomalyType::kInfActivation, AnomalyType::kDeadLayer,
      AnomalyType::kExplodingVariance, AnomalyType::kHighVariance,  AnomalyType::kEmptyOutput,
      AnomalyType::kZeroGradient,      AnomalyType::kNanGradient,   AnomalyType::kRankDivergence,
  };
  static py::handle Class() { return Globals().anomaly_type; }
};
template <>
struct EnumInfo<DiffSeverity> {
  static constexpr const char* kName = "DiffSeverity";
  static constexpr std::array kValues = {DiffSeverity::kInfo, DiffSeverity::kWarning,
                                         DiffSeverity::kCritical};
  static py::handle Class() { return Globals().diff_severity; }
};
template <>
struct EnumInfo<DiffKind> {
  static constexpr const char* kName = "DiffKind";
  static constexpr std::array kValues = {
      DiffKind::kLayerAdded,          DiffKind::kLayerRemoved,       DiffKind::kShapeChange,
      DiffKind::kLatencyRegression,   DiffKind::kLatencyImprovement, DiffKind::kGradNormChange,
      DiffKind::kActivationStdChange, DiffKind::kNewAnomaly,         DiffKind::kResolvedAnomaly,
  };
  static py::handle Class() { return Globals().diff_kind; }
};

// Creates `enum.StrEnum(kName, [("WARNING", "warning"), ...], module="tracetorch")`.
template <typename E>
py::object MakeStrEnum() {
  py::list members;
  for (E value : EnumInfo<E>::kValues) {
    const std::string spelling(ToString(value));
    members.append(py::make_tuple(absl::AsciiStrToUpper(spelling), spelling));
  }
  py::object str_enum = py::module_::import("enum").attr("StrEnum");
  return str_enum(EnumInfo<E>::kName, members, py::arg("module") = "tracetorch");
}

// Loads an E from any str (a StrEnum member is one). Non-str: not convertible (TypeError from
// pybind11); an unknown spelling: ValueError listing the accepted ones.
template <typename E>
bool LoadEnum(py::handle src, E* out) {
  if (!src || !PyUnicode_Check(src.ptr())) return false;
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(src.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    return false;
  }
  const std::string_view text(data, static_cast<size_t>(size));
  std::string accepted;
  for (E value : EnumInfo<E>::kValues) {
    if (ToString(value) == text) {
      *out = value;
      return true;
    }
    absl::StrAppend(&accepted, accepted.empty() ? "" : ", ", "'", Str(ToString(value)), "'");
  }
  throw py::value_error(absl::StrCat("'", Str(text), "' is not a valid ", EnumInfo<E>::kName,
                                     " (expected one of ", accepted, ")"));
}

template <typename E>
py::handle CastEnum(E value) {
  return EnumInfo<E>::Class()(std::string(ToString(value))).release();
}

}  // namespace tracetorch::python

namespace pybind11::detail {

#define TRACETORCH_STR_ENUM_CASTER(EnumType, PyName)                                  \
  template <>                                                                         \
  struct type_caster<EnumType> {                                                      \
    PYBIND11_TYPE_CASTER(EnumType, const_name(PyName));                               \
    bool load(handle src, bool) { return tracetorch::python::LoadEnum(src, &value); } \
    static handle cast(EnumType v, return_value_policy, handle) {                     \
      return tracetorch::python::CastEnum(v);                                         \
    }                                                                                 \
  }

TRACETORCH_STR_ENUM_CASTER(tracetorch::AnomalySeverity, "AnomalySeverity");
TRACETORCH_STR_ENUM_CASTER(tracetorch::AnomalyType, "AnomalyType");
TRACETORCH_STR_ENUM_CASTER(tracetorch::DiffSeverity, "DiffSeverity");
TRACETORCH_STR_ENUM_CASTER(tracetorch::DiffKind, "DiffKind");

#undef TRACETORCH_STR_ENUM_CASTER

}  // namespace pybind11::detail

namespace tracetorch::python {

// str or os.PathLike[str] -> the path (TypeError otherwise).
std::string FsPath(const py::handle& path);

// ---- JSON round trips ---------------------------------------------------------------------------

py::object JsonLoads(const std::string& text);
py::object RecordToDict(const TraceRecord& record);
// Parses `document` (a Python dict in the trace layout) with the C++ reader, so that a dict given
// by a user gets the same validation, defaults and error messages as a file.
TraceRecord RecordFromPyDocument(const py::handle& document);
py::dict Document(py::object metadata, py::list layers, py::list warnings);
bool IsMapping(const py::handle& obj);

// to_dict of the parts, through the writer.
py::object MetadataToDict(const TraceMetadata& metadata);
py::object LayerToDict(const LayerTrace& layer);
py::object TensorToDict(const TensorInfo& tensor);
py::object AnomalyToDict(const Anomaly& anomaly);
py::object DiffToDict(const TraceDiff& diff);
py::object DiffEntryToDict(const DiffEntry& entry);

// ---- details ------------------------------------------------------------------------------------

py::dict DetailsToPy(const Details& details);
// None or a dict of None, bool, int, float, str or list[str] values.
Details DetailsFromPy(const py::handle& obj);

// ---- Conversions from Python objects that may be dicts in the library's layout -----------------

TraceMetadata MetadataFromPy(const py::handle& obj);
LayerTrace LayerFromPy(const py::handle& obj);
Anomaly AnomalyFromPy(const py::handle& obj);

template <typename T, typename Convert>
std::vector<T> ListFromPy(const py::handle& obj, Convert convert, const char* what) {
  if (PyUnicode_Check(obj.ptr()) || IsMapping(obj) || !py::isinstance<py::iterable>(obj)) {
    throw py::type_error(std::string(what) + " must be a list");
  }
  std::vector<T> out;
  for (py::handle item : obj) out.push_back(convert(item));
  return out;
}

template <typename T>
py::list ListToPy(const std::vector<T>& values) {
  py::list out;
  for (const T& value : values) out.append(py::cast(value));
  return out;
}

// ---- Shared class helpers -----------------------------------------------------------------------

// Builds a T from arguments by setting each as an attribute of a default T, so that the
// constructor accepts exactly the attributes (and their setters' conversions and checks).
// Positional arguments name the attributes in `order` (the library's dataclass field order).
template <typename T>
T FromArgs(const py::args& args, const py::kwargs& kwargs, absl::Span<const std::string_view> order,
           const char* type_name) {
  if (args.size() > order.size()) {
    throw py::type_error(absl::StrCat(type_name, "() takes at most ", order.size(),
                                      " positional arguments (", args.size(), " given)"));
  }
  py::object obj = py::cast(T{});
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string key(order[i]);
    const py::str name(key);
    if (kwargs.contains(name)) {
      throw py::type_error(
          absl::StrCat(type_name, "() got multiple values for argument '", key, "'"));
    }
    py::setattr(obj, name, args[i]);
  }
  for (auto [key, value] : kwargs) {
    const std::string name = py::str(key);
    if (name.starts_with("_") || !py::hasattr(obj, key) || PyCallable_Check(obj.attr(key).ptr())) {
      throw py::type_error(
          absl::StrCat(type_name, "() got an unexpected keyword argument '", name, "'"));
    }
    py::setattr(obj, key, value);
  }
  return obj.cast<T>();
}

template <typename T, typename... Extra>
void AddValueSemantics(py::class_<T, Extra...>& cls) {
  cls.def(py::self == py::self)
      .def(py::self != py::self)
      .def("__copy__", [](const T& self) { return T(self); })
      .def(
          "__deepcopy__", [](const T& self, const py::object&) { return T(self); },
          py::arg("memo"));
}

std::string Repr(const py::handle& value);

template <typename T>
std::string OptRepr(const std::optional<T>& value) {
  return value ? Repr(py::cast(*value)) : "None";
}

// Mapping-style access (`obj["key"]`, `obj.get("key")`, `"key" in obj`) through to_dict(), for code
// written against the library where metadata and warnings are plain dicts.
template <typename T, typename... Extra>
void AddReadOnlyMappingAccess(py::class_<T, Extra...>& cls) {
  cls.def(
         "__getitem__",
         [](const py::object& self, const py::object& key) -> py::object {
           // Convert before the temporary dict dies: an accessor would dangle.
           return self.attr("to_dict")()[key];
         },
         py::arg("key"))
      .def(
          "get",
          [](const py::object& self, const py::object& key, const py::object& fallback) {
            return self.attr("to_dict")().attr("get")(key, fallback);
          },
          py::arg("key"), py::arg("default") = py::none())
      .def(
          "__contains__",
          [](const py::object& self, const py::object& key) {
            return self.attr("to_dict")().contains(key);
          },
          py::arg("key"))
      .def("keys", [](const py::object& self) { return self.attr("to_dict")().attr("keys")(); })
      .def("items", [](const py::object& self) { return self.attr("to_dict")().attr("items")(); })
      .def("values",
           [](const py::object& self) { return self.attr("to_dict")().attr("values")(); });
}

}  // namespace tracetorch::python

#endif  // TRACETORCH_AGENT_PYTHON_RECORD_CONVERT_H_
