// Python bindings of the trace data model; see bind_record.h.
//
// Design notes:
//  - Scalar fields are bound in place. List fields (`record.layers`, `layer.outputs`, ...) are
//  returned
//    as Python lists of COPIES: a Python object must never point into a std::vector that a later
//    assignment can reallocate. To change a layer, assign the list back (`record.layers = layers`).
//  - to_dict() and the dict/mapping constructors go through the C++ JSON writer and reader
//    (trace/json.h), so there is one definition of the layout and of its validation.
//  - The enums are Python `enum.StrEnum` classes created here from the C++ ToString() spellings; a
//    custom type caster converts between them (or a plain str) and the C++ enums.
#include "agent/python/bind_record.h"

#include <pybind11/operators.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "trace/anomaly.h"
#include "trace/diff.h"
#include "trace/json.h"
#include "trace/record.h"

namespace tracetorch::python {
namespace {

namespace py = pybind11;

// Python objects created once by BindRecord and deliberately never released: they must outlive
// every binding call, and a static py::object destructor would run after the interpreter is gone.
struct PyGlobals {
  py::handle json_loads;
  py::handle json_dumps;
  py::handle os_fspath;
  py::handle anomaly_severity;
  py::handle anomaly_type;
  py::handle diff_severity;
  py::handle diff_kind;
};
// absl::StrCat here does not take std::string_view (Debian's absl has its own string_view).
std::string Str(std::string_view text) { return std::string(text); }

PyGlobals& Globals() {
  static PyGlobals* globals = new PyGlobals();
  return *globals;
}

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

}  // namespace
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
namespace {

// ---- Status -> Python exception ---------------------------------------------------------------

// Raises the Python exception for a non-OK `status`. `path`, when given, becomes the OSError's
// filename (FileNotFoundError, PermissionError) or prefixes the message (ValueError).
[[noreturn]] void ThrowStatus(const absl::Status& status, const std::string& path = "") {
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied: {
      const bool not_found = status.code() == absl::StatusCode::kNotFound;
      PyObject* type = not_found ? PyExc_FileNotFoundError : PyExc_PermissionError;
      if (path.empty()) {
        PyErr_SetString(type, message.c_str());
      } else {
        // OSError(errno, strerror, filename) fills .errno and .filename.
        py::object exc =
            py::reinterpret_borrow<py::object>(type)(not_found ? ENOENT : EACCES, message, path);
        PyErr_SetObject(type, exc.ptr());
      }
      throw py::error_already_set();
    }
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      throw py::value_error(path.empty() ? message : absl::StrCat(path, ": ", message));
    default:
      throw std::runtime_error(absl::StrCat(
          path.empty() ? "" : path + ": ", absl::StatusCodeToString(status.code()), ": ", message));
  }
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
// by a user gets the same validation, defaults and error messages as a file.
TraceRecord RecordFromPyDocument(const py::handle& document) {
  const std::string text = Globals().json_dumps(document).cast<std::string>();
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

py::dict DetailsToPy(const Details& details) {
  py::dict out;
  for (const auto& [key, value] : details) out[py::str(key)] = DetailToPy(value);
  return out;
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

// ---- Shared class helpers -----------------------------------------------------------------------

// Builds a T from keyword arguments by setting each as an attribute of a default T, so that the
// constructor accepts exactly the attributes (and their setters' conversions and checks).
template <typename T>
T FromKwargs(const py::kwargs& kwargs, const char* type_name) {
  py::object obj = py::cast(T{});
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

std::string Repr(const py::handle& value) { return py::repr(value).cast<std::string>(); }

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

// ---- TensorInfo (Python: TensorStats)
// -------------------------------------------------------------

TensorStats& EnsureStats(TensorInfo& tensor) {
  if (!tensor.stats) tensor.stats.emplace();
  return *tensor.stats;
}

template <std::optional<double> TensorStats::*Field>
void DefStat(py::class_<TensorInfo>& cls, const char* name, const char* doc) {
  cls.def_property(
      name,
      [](const TensorInfo& t) -> std::optional<double> {
        return t.stats ? (*t.stats).*Field : std::nullopt;
      },
      [](TensorInfo& t, std::optional<double> v) { EnsureStats(t).*Field = v; }, doc);
}

template <int64_t TensorStats::*Field>
void DefCount(py::class_<TensorInfo>& cls, const char* name, const char* doc) {
  cls.def_property(
      name, [](const TensorInfo& t) -> int64_t { return t.stats ? (*t.stats).*Field : 0; },
      [name](TensorInfo& t, int64_t v) {
        if (v < 0) throw py::value_error(absl::StrCat(name, " must be >= 0, got ", v));
        EnsureStats(t).*Field = v;
      },
      doc);
}

void BindTensor(py::module_& m) {
  py::class_<TensorInfo> cls(m, "TensorStats", R"doc(
One input or output tensor of a layer call: shape, dtype, device and (when captured) statistics.

The statistics are flattened onto the object, as in the JSON layout: ``t.mean``, ``t.std``,
``t.min``, ``t.max`` (None when not captured, or for non-float and empty tensors) and
``t.nan_count``, ``t.inf_count`` (0 when not captured). ``has_stats`` tells whether statistics were
captured at all; a tensor without them is written without the statistic keys.

    t = TensorStats([16, 64], "torch.float32", "cpu", mean=0.1, std=1.0)
    t.to_dict()["shape"] == [16, 64]
)doc");
  cls.def(py::init([](std::vector<int64_t> shape, std::string dtype, std::string device,
                      std::optional<double> mean, std::optional<double> std,
                      std::optional<double> min, std::optional<double> max,
                      std::optional<int64_t> nan_count, std::optional<int64_t> inf_count) {
            TensorInfo t;
            t.shape = std::move(shape);
            t.dtype = std::move(dtype);
            t.device = std::move(device);
            if (mean || std || min || max || nan_count || inf_count) {
              if (nan_count.value_or(0) < 0 || inf_count.value_or(0) < 0) {
                throw py::value_error("nan_count and inf_count must be >= 0");
              }
              t.stats = TensorStats{.mean = mean,
                                    .std = std,
                                    .min = min,
                                    .max = max,
                                    .nan_count = nan_count.value_or(0),
                                    .inf_count = inf_count.value_or(0)};
            }
            return t;
          }),
          py::arg("shape") = std::vector<int64_t>{}, py::arg("dtype") = "", py::arg("device") = "",
          py::kw_only(), py::arg("mean") = py::none(), py::arg("std") = py::none(),
          py::arg("min") = py::none(), py::arg("max") = py::none(),
          py::arg("nan_count") = py::none(), py::arg("inf_count") = py::none(),
          "Statistics are captured (has_stats) when any statistic argument is given.")
      .def_readwrite("shape", &TensorInfo::shape, "list[int]")
      .def_readwrite("dtype", &TensorInfo::dtype, "As torch prints it: 'torch.float32'.")
      .def_readwrite("device", &TensorInfo::device, "'cpu', 'cuda:0'.")
      .def_property(
          "has_stats", [](const TensorInfo& t) { return t.stats.has_value(); },
          [](TensorInfo& t, bool has) {
            if (!has) {
              t.stats.reset();
            } else {
              EnsureStats(t);
            }
          },
          "Whether statistics were captured. Setting False drops them.");
  DefStat<&TensorStats::mean>(cls, "mean", "Mean over finite elements, or None.");
  DefStat<&TensorStats::std>(cls, "std", "Population std over finite elements, or None.");
  DefStat<&TensorStats::min>(cls, "min", "Minimum finite element, or None.");
  DefStat<&TensorStats::max>(cls, "max", "Maximum finite element, or None.");
  DefCount<&TensorStats::nan_count>(cls, "nan_count", "Number of NaN elements.");
  DefCount<&TensorStats::inf_count>(cls, "inf_count", "Number of +/-Inf elements.");
  cls.def("to_dict", &TensorToDict, "The JSON layout of this tensor entry, as a dict.")
      .def("__repr__", [](const TensorInfo& t) {
        std::string out =
            absl::StrCat("TensorStats(shape=", Repr(py::cast(t.shape)),
                         ", dtype=", Repr(py::str(t.dtype)), ", device=", Repr(py::str(t.device)));
        if (t.stats) {
          absl::StrAppend(&out, ", mean=", OptRepr(t.stats->mean), ", std=", OptRepr(t.stats->std),
                          ", min=", OptRepr(t.stats->min), ", max=", OptRepr(t.stats->max),
                          ", nan_count=", t.stats->nan_count, ", inf_count=", t.stats->inf_count);
        }
        return out + ")";
      });
  AddValueSemantics(cls);
  m.attr("TensorInfo") = cls;
}

// ---- Metadata -----------------------------------------------------------------------------------

constexpr std::array<std::string_view, 9> kModelledMetadataKeys = {
    "model_name",   "pytorch_version", "python_version", "platform",   "cuda_available",
    "cuda_version", "active_device",   "total_time_ms",  "nan_origin",
};

bool IsModelledMetadataKey(std::string_view key) {
  for (std::string_view k : kModelledMetadataKeys) {
    if (k == key) return true;
  }
  return false;
}

std::string MinifiedJson(const py::handle& value, const std::string& key) {
  try {
    return Globals()
        .json_dumps(value, py::arg("separators") = py::make_tuple(",", ":"),
                    py::arg("allow_nan") = false)
        .cast<std::string>();
  } catch (py::error_already_set& e) {
    if (e.matches(PyExc_ValueError) || e.matches(PyExc_TypeError)) {
      throw py::value_error("metadata['" + key +
                            "'] is not JSON-serialisable: " + std::string(py::str(e.value())));
    }
    throw;
  }
}

void SetMetadataExtra(TraceMetadata& metadata, const std::string& key, const py::handle& value) {
  if (IsModelledMetadataKey(key)) {
    throw py::value_error("'" + key + "' is a modelled metadata field; set the attribute instead");
  }
  std::string text = MinifiedJson(value, key);
  for (auto& [k, v] : metadata.extra) {
    if (k == key) {
      v = std::move(text);
      return;
    }
  }
  metadata.extra.emplace_back(key, std::move(text));
}

NanOrigin NanOriginFromPy(const py::handle& obj) {
  if (py::isinstance<NanOrigin>(obj)) return obj.cast<NanOrigin>();
  py::dict metadata;
  metadata["nan_origin"] = obj;
  TraceMetadata parsed = MetadataFromPy(metadata);
  if (!parsed.nan_origin) throw py::value_error("nan_origin: expected an object");
  return *parsed.nan_origin;
}

void BindMetadata(py::module_& m) {
  py::class_<NanOrigin> origin(m, "NanOrigin", R"doc(
Where a non-finite value first appeared: the model input ("<input>") or the first layer, in
execution order, whose inputs were finite and whose outputs were not; and in which forward pass.
)doc");
  origin
      .def(py::init([](std::string layer, int64_t step, std::string_view kind) {
             if (kind != "nan" && kind != "inf") {
               throw py::value_error("kind must be 'nan' or 'inf'");
             }
             return NanOrigin{.layer = std::move(layer), .step = step, .is_nan = kind == "nan"};
           }),
           py::arg("layer"), py::arg("step") = 0, py::arg("kind") = "nan")
      .def_readwrite("layer", &NanOrigin::layer, "full_name of the layer, or '<input>'.")
      .def_readwrite("step", &NanOrigin::step, "0-based forward pass in which it appeared.")
      .def_readwrite("is_nan", &NanOrigin::is_nan, "False when the first value was +/-Inf.")
      .def_property(
          "kind", [](const NanOrigin& o) { return o.is_nan ? "nan" : "inf"; },
          [](NanOrigin& o, std::string_view kind) {
            if (kind != "nan" && kind != "inf") {
              throw py::value_error("kind must be 'nan' or 'inf'");
            }
            o.is_nan = kind == "nan";
          },
          "'nan' or 'inf', as in the JSON.")
      .def_property_readonly_static("MODEL_INPUT",
                                    [](const py::object&) { return NanOrigin::kModelInput; })
      .def("to_dict",
           [](const NanOrigin& o) -> py::object {
             TraceMetadata metadata;
             metadata.nan_origin = o;
             return MetadataToDict(metadata)["nan_origin"];
           })
      .def("__repr__", [](const NanOrigin& o) {
        return absl::StrCat("NanOrigin(layer=", Repr(py::str(o.layer)), ", step=", o.step,
                            ", kind='", o.is_nan ? "nan" : "inf", "')");
      });
  AddValueSemantics(origin);

  py::class_<TraceMetadata> cls(m, "TraceMetadata", R"doc(
Run metadata. Attributes for the modelled keys; keys this version does not model (and agent
counters such as "dropped_events") live in ``extra``. Also usable as a dict, as in the library:
``metadata["model_name"]``, ``metadata.get("total_time_ms")``, ``metadata["my_key"] = 1``.
)doc");
  cls.def(py::init([](const py::kwargs& kwargs) {
            TraceMetadata metadata;
            py::object obj = py::cast(metadata);
            for (auto [key, value] : kwargs) obj[key] = value;
            return obj.cast<TraceMetadata>();
          }),
          "Keyword arguments: the modelled fields; any other key goes to extra.")
      .def_readwrite("model_name", &TraceMetadata::model_name)
      .def_readwrite("pytorch_version", &TraceMetadata::pytorch_version)
      .def_readwrite("python_version", &TraceMetadata::python_version)
      .def_readwrite("platform", &TraceMetadata::platform)
      .def_readwrite("cuda_available", &TraceMetadata::cuda_available)
      .def_readwrite("cuda_version", &TraceMetadata::cuda_version)
      .def_readwrite("active_device", &TraceMetadata::active_device)
      .def_readwrite("total_time_ms", &TraceMetadata::total_time_ms, "float | None")
      .def_property(
          "nan_origin",
          [](const TraceMetadata& md) -> py::object {
            return md.nan_origin ? py::cast(*md.nan_origin) : py::none();
          },
          [](TraceMetadata& md, const py::object& value) {
            if (value.is_none()) {
              md.nan_origin.reset();
            } else {
              md.nan_origin = NanOriginFromPy(value);
            }
          },
          "NanOrigin | None (a copy: assign to change it).")
      .def_property(
          "extra",
          [](const TraceMetadata& md) {
            py::dict out;
            for (const auto& [key, text] : md.extra) out[py::str(key)] = JsonLoads(text);
            return out;
          },
          [](TraceMetadata& md, const py::handle& values) {
            if (!IsMapping(values)) throw py::type_error("extra must be a dict");
            TraceMetadata updated = md;
            updated.extra.clear();
            for (py::handle key : values) {
              SetMetadataExtra(updated, py::str(key).cast<std::string>(), values[key]);
            }
            md = std::move(updated);
          },
          "Unmodelled keys, as a dict of JSON values (a copy: assign to change it).")
      .def("to_dict", &MetadataToDict, "The JSON layout of the metadata, as a dict.")
      .def(
          "__setitem__",
          [](py::object self, const std::string& key, const py::object& value) {
            if (IsModelledMetadataKey(key)) {
              py::setattr(self, py::str(key), value);
            } else {
              SetMetadataExtra(self.cast<TraceMetadata&>(), key, value);
            }
          },
          py::arg("key"), py::arg("value"))
      .def("__iter__", [](const py::object& self) { return py::iter(self.attr("to_dict")()); })
      .def("__len__", [](const py::object& self) { return py::len(self.attr("to_dict")()); })
      .def("__repr__", [](const py::object& self) {
        return "TraceMetadata(" + Repr(self.attr("to_dict")()) + ")";
      });
  AddReadOnlyMappingAccess(cls);
  AddValueSemantics(cls);
}

// ---- LayerTrace ---------------------------------------------------------------------------------

void BindLayer(py::module_& m) {
  py::class_<LayerTrace> cls(m, "LayerTrace", R"doc(
Everything recorded for one module, aggregated over its calls. Unmeasured values are None.
``inputs`` and ``outputs`` (lists of TensorStats, of the latest call) are copies: assign a list to
change them. Construct with keyword arguments named like the attributes.
)doc");
  cls.def(py::init([](const py::kwargs& kwargs) {
       return FromKwargs<LayerTrace>(kwargs, "LayerTrace");
     }))
      .def_readwrite("name", &LayerTrace::name, "Last component of the module path ('fc').")
      .def_readwrite("type", &LayerTrace::type, "Class name ('Linear').")
      .def_readwrite("full_name", &LayerTrace::full_name, "Dotted module path ('blocks.0.fc').")
      .def_readwrite("depth", &LayerTrace::depth)
      .def_readwrite("params", &LayerTrace::params, "Direct parameters only.")
      .def_property(
          "inputs", [](const LayerTrace& l) { return ListToPy(l.inputs); },
          [](LayerTrace& l, std::vector<TensorInfo> v) { l.inputs = std::move(v); })
      .def_property(
          "outputs", [](const LayerTrace& l) { return ListToPy(l.outputs); },
          [](LayerTrace& l, std::vector<TensorInfo> v) { l.outputs = std::move(v); })
      .def_readwrite("latency_ms", &LayerTrace::latency_ms)
      .def_readwrite("latency_ms_min", &LayerTrace::latency_ms_min)
      .def_readwrite("latency_ms_max", &LayerTrace::latency_ms_max)
      .def_readwrite("latency_ms_mean", &LayerTrace::latency_ms_mean)
      .def_readwrite("forward_count", &LayerTrace::forward_count)
      .def_readwrite("has_nan", &LayerTrace::has_nan)
      .def_readwrite("has_inf", &LayerTrace::has_inf)
      .def_readwrite("grad_norm", &LayerTrace::grad_norm)
      .def_readwrite("grad_mean", &LayerTrace::grad_mean)
      .def_readwrite("grad_has_nan", &LayerTrace::grad_has_nan)
      .def_readwrite("has_zero_grad", &LayerTrace::has_zero_grad)
      .def_readwrite("grad_in_norm", &LayerTrace::grad_in_norm)
      .def_readwrite("grad_in_mean", &LayerTrace::grad_in_mean)
      .def_readwrite("grad_in_has_nan", &LayerTrace::grad_in_has_nan)
      .def_readwrite("bwd_latency_ms", &LayerTrace::bwd_latency_ms)
      .def_readwrite("bwd_latency_ms_min", &LayerTrace::bwd_latency_ms_min)
      .def_readwrite("bwd_latency_ms_max", &LayerTrace::bwd_latency_ms_max)
      .def_readwrite("bwd_latency_ms_mean", &LayerTrace::bwd_latency_ms_mean)
      .def_readwrite("backward_count", &LayerTrace::backward_count)
      .def_readwrite("fwd_mem_alloc_delta", &LayerTrace::fwd_mem_alloc_delta)
      .def_readwrite("fwd_mem_reserved_delta", &LayerTrace::fwd_mem_reserved_delta)
      .def_readwrite("bwd_mem_alloc_delta", &LayerTrace::bwd_mem_alloc_delta)
      .def_readwrite("bwd_mem_reserved_delta", &LayerTrace::bwd_mem_reserved_delta)
      .def_readwrite("module_type", &LayerTrace::type, "Alias of `type` (the library's name).")
      .def("to_dict", &LayerToDict, "The JSON layout of this layer, as a dict.")
      .def_static(
          "from_dict", [](const py::handle& d) { return LayerFromPy(d); }, py::arg("data"),
          "Parses a dict in the JSON layout (ValueError naming the bad field).")
      .def("__repr__", [](const LayerTrace& l) {
        return absl::StrCat("LayerTrace(full_name=", Repr(py::str(l.full_name)),
                            ", type=", Repr(py::str(l.type)), ", forward_count=", l.forward_count,
                            ", backward_count=", l.backward_count, ")");
      });
  AddValueSemantics(cls);
}

// ---- Anomalies ----------------------------------------------------------------------------------

void BindAnomaly(py::module_& m) {
  py::class_<Anomaly> cls(m, "Anomaly", R"doc(
One finding of detect_anomalies. ``type`` and ``severity`` are AnomalyType / AnomalySeverity (a str
with the JSON spelling is accepted where one is expected); ``details`` is a dict (a copy). Also
readable as a dict (``a["message"]``, ``a.get("details")``), as the library's warnings were.
)doc");
  cls.def(py::init([](AnomalyType type, AnomalySeverity severity, std::string layer,
                      std::string message, const py::object& details) {
            return Anomaly{.type = type,
                           .severity = severity,
                           .layer = std::move(layer),
                           .message = std::move(message),
                           .details = DetailsFromPy(details)};
          }),
          py::arg("type"), py::arg("severity"), py::arg("layer") = "", py::arg("message") = "",
          py::arg("details") = py::none())
      .def_readwrite("type", &Anomaly::type)
      .def_readwrite("severity", &Anomaly::severity)
      .def_readwrite("layer", &Anomaly::layer, "full_name of the layer, or '<input>'.")
      .def_readwrite("message", &Anomaly::message)
      .def_property(
          "details", [](const Anomaly& a) { return DetailsToPy(a.details); },
          [](Anomaly& a, const py::object& d) { a.details = DetailsFromPy(d); })
      .def("to_dict", &AnomalyToDict, "The JSON layout of this finding, as a dict.")
      .def_static(
          "from_dict", [](const py::handle& d) { return AnomalyFromPy(d); }, py::arg("data"))
      .def("__repr__", [](const Anomaly& a) {
        return absl::StrCat("Anomaly(type='", Str(ToString(a.type)), "', severity='",
                            Str(ToString(a.severity)), "', layer=", Repr(py::str(a.layer)),
                            ", message=", Repr(py::str(a.message)), ")");
      });
  AddReadOnlyMappingAccess(cls);
  AddValueSemantics(cls);

  const Thresholds defaults;
  py::class_<Thresholds> thresholds(m, "Thresholds", R"doc(
Anomaly detection thresholds (see trace/anomaly.h). Keyword-only; invalid values raise ValueError
naming the field:

    Thresholds(exploding_variance_std=50.0, high_variance_min=5.0)
)doc");
  thresholds
      .def(py::init([](double dead_layer_mean, double dead_layer_std, double exploding_variance_std,
                       double high_variance_min, double variance_spike_ratio) {
             Thresholds t{.dead_layer_mean = dead_layer_mean,
                          .dead_layer_std = dead_layer_std,
                          .exploding_variance_std = exploding_variance_std,
                          .high_variance_min = high_variance_min,
                          .variance_spike_ratio = variance_spike_ratio};
             if (absl::Status s = t.Validate(); !s.ok()) ThrowStatus(s);
             return t;
           }),
           py::kw_only(), py::arg("dead_layer_mean") = defaults.dead_layer_mean,
           py::arg("dead_layer_std") = defaults.dead_layer_std,
           py::arg("exploding_variance_std") = defaults.exploding_variance_std,
           py::arg("high_variance_min") = defaults.high_variance_min,
           py::arg("variance_spike_ratio") = defaults.variance_spike_ratio)
      .def_readwrite("dead_layer_mean", &Thresholds::dead_layer_mean)
      .def_readwrite("dead_layer_std", &Thresholds::dead_layer_std)
      .def_readwrite("exploding_variance_std", &Thresholds::exploding_variance_std)
      .def_readwrite("high_variance_min", &Thresholds::high_variance_min)
      .def_readwrite("variance_spike_ratio", &Thresholds::variance_spike_ratio)
      .def(
          "validate",
          [](const Thresholds& t) {
            if (absl::Status s = t.Validate(); !s.ok()) ThrowStatus(s);
          },
          "Raises ValueError when the values are invalid (after attribute changes).")
      .def(
          "__eq__",
          [](const Thresholds& a, const Thresholds& b) {
            return a.dead_layer_mean == b.dead_layer_mean && a.dead_layer_std == b.dead_layer_std &&
                   a.exploding_variance_std == b.exploding_variance_std &&
                   a.high_variance_min == b.high_variance_min &&
                   a.variance_spike_ratio == b.variance_spike_ratio;
          },
          py::is_operator())
      .def("__repr__", [](const Thresholds& t) {
        return absl::StrCat("Thresholds(dead_layer_mean=", Repr(py::float_(t.dead_layer_mean)),
                            ", dead_layer_std=", Repr(py::float_(t.dead_layer_std)),
                            ", exploding_variance_std=", Repr(py::float_(t.exploding_variance_std)),
                            ", high_variance_min=", Repr(py::float_(t.high_variance_min)),
                            ", variance_spike_ratio=", Repr(py::float_(t.variance_spike_ratio)),
                            ")");
      });
}

// ---- Diff ---------------------------------------------------------------------------------------

void BindDiff(py::module_& m) {
  py::class_<DiffEntry> entry(m, "DiffEntry", "One observed change between two traces.");
  entry
      .def(py::init([](DiffSeverity severity, DiffKind kind, std::string layer, std::string message,
                       const py::object& details) {
             return DiffEntry{.severity = severity,
                              .kind = kind,
                              .layer = std::move(layer),
                              .message = std::move(message),
                              .details = DetailsFromPy(details)};
           }),
           py::arg("severity"), py::arg("kind"), py::arg("layer") = "", py::arg("message") = "",
           py::arg("details") = py::none())
      .def_readwrite("severity", &DiffEntry::severity)
      .def_readwrite("kind", &DiffEntry::kind, "DiffKind (a str: 'latency_regression', ...).")
      .def_readwrite("layer", &DiffEntry::layer)
      .def_readwrite("message", &DiffEntry::message)
      .def_property(
          "details", [](const DiffEntry& e) { return DetailsToPy(e.details); },
          [](DiffEntry& e, const py::object& d) { e.details = DetailsFromPy(d); })
      .def("to_dict", &DiffEntryToDict)
      .def("__repr__", [](const DiffEntry& e) {
        return absl::StrCat("DiffEntry(severity='", Str(ToString(e.severity)), "', kind='",
                            Str(ToString(e.kind)), "', layer=", Repr(py::str(e.layer)),
                            ", message=", Repr(py::str(e.message)), ")");
      });
  AddValueSemantics(entry);

  py::class_<TraceDiff> diff(m, "TraceDiff", R"doc(
The comparison of two traces (see diff_records). ``entries`` is a list of DiffEntry (a copy).
)doc");
  diff.def(py::init([](std::string baseline_model, std::string current_model,
                       std::vector<DiffEntry> entries) {
             return TraceDiff{.baseline_model = std::move(baseline_model),
                              .current_model = std::move(current_model),
                              .entries = std::move(entries)};
           }),
           py::arg("baseline_model") = "", py::arg("current_model") = "",
           py::arg("entries") = std::vector<DiffEntry>{})
      .def_readwrite("baseline_model", &TraceDiff::baseline_model)
      .def_readwrite("current_model", &TraceDiff::current_model)
      .def_property(
          "entries", [](const TraceDiff& d) { return ListToPy(d.entries); },
          [](TraceDiff& d, std::vector<DiffEntry> v) { d.entries = std::move(v); })
      .def_property_readonly("has_regressions", &TraceDiff::has_regressions,
                             "True when any entry is a warning or critical.")
      .def_property_readonly("critical_count", &TraceDiff::critical_count)
      .def_property_readonly("warning_count", &TraceDiff::warning_count)
      .def("to_dict", &DiffToDict, "The document `tracetorch diff --json` prints, as a dict.")
      .def(
          "to_json",
          [](const TraceDiff& d, int indent) {
            if (indent < 0) throw py::value_error("indent must be >= 0");
            return DiffToJson(d, JsonStyle{.indent = indent});
          },
          py::arg("indent") = 2)
      .def("__repr__", [](const TraceDiff& d) {
        return absl::StrCat("TraceDiff(baseline_model=", Repr(py::str(d.baseline_model)),
                            ", current_model=", Repr(py::str(d.current_model)),
                            ", entries=", d.entries.size(), ", critical_count=", d.critical_count(),
                            ", warning_count=", d.warning_count(), ")");
      });
}

// ---- TraceRecord and files ----------------------------------------------------------------------

void BindTraceRecord(py::module_& m) {
  py::class_<TraceRecord> cls(m, "TraceRecord", R"doc(
One trace: metadata, layers (children before parents, in the order they first completed a forward
pass) and the anomalies found when it was finalised.

``metadata`` is live (``record.metadata.model_name = "x"`` changes the record); ``layers`` and
``warnings`` are lists of copies: assign a list to change them. The constructor and the setters
also accept the library's plain dicts (metadata dict, layer dicts, warning dicts).
)doc");
  cls.def(py::init(
              [](const py::object& metadata, const py::object& layers, const py::object& warnings) {
                TraceRecord record;
                record.metadata = MetadataFromPy(metadata);
                if (!layers.is_none())
                  record.layers = ListFromPy<LayerTrace>(layers, LayerFromPy, "layers");
                if (!warnings.is_none()) {
                  record.warnings = ListFromPy<Anomaly>(warnings, AnomalyFromPy, "warnings");
                }
                return record;
              }),
          py::arg("metadata") = py::none(), py::arg("layers") = py::none(),
          py::arg("warnings") = py::none())
      .def_property("metadata",
                    py::cpp_function([](TraceRecord& r) -> TraceMetadata& { return r.metadata; },
                                     py::return_value_policy::reference_internal),
                    py::cpp_function([](TraceRecord& r, const py::handle& v) {
                      r.metadata = MetadataFromPy(v);
                    }),
                    "TraceMetadata (live).")
      .def_property(
          "layers", [](const TraceRecord& r) { return ListToPy(r.layers); },
          [](TraceRecord& r, const py::handle& v) {
            r.layers = ListFromPy<LayerTrace>(v, LayerFromPy, "layers");
          },
          "list[LayerTrace] (copies).")
      .def_property(
          "warnings", [](const TraceRecord& r) { return ListToPy(r.warnings); },
          [](TraceRecord& r, const py::handle& v) {
            r.warnings = ListFromPy<Anomaly>(v, AnomalyFromPy, "warnings");
          },
          "list[Anomaly] (copies).")
      .def(
          "find_layer",
          [](const TraceRecord& r, std::string_view full_name) -> py::object {
            const LayerTrace* layer = r.FindLayer(full_name);
            return layer == nullptr ? py::none() : py::cast(*layer);
          },
          py::arg("full_name"), "The layer with this full_name (a copy), or None.")
      .def("to_dict", &RecordToDict,
           "The JSON document, as a dict: equal to json.load() of the exported file.")
      .def(
          "to_json",
          [](const TraceRecord& r, int indent) {
            if (indent < 0) throw py::value_error("indent must be >= 0");
            return TraceToJson(r, JsonStyle{.indent = indent});
          },
          py::arg("indent") = 2, "The JSON document as text (strict RFC 8259).")
      .def_static(
          "from_dict", [](const py::handle& d) { return RecordFromPyDocument(d); }, py::arg("data"),
          "Parses a dict in the JSON layout (ValueError naming the bad field).")
      .def_static(
          "from_json",
          [](std::string_view text) {
            absl::StatusOr<TraceRecord> record = ParseTraceJson(text);
            if (!record.ok()) ThrowStatus(record.status());
            return *std::move(record);
          },
          py::arg("text"), "Parses JSON text (ValueError with line and column when malformed).")
      .def("__repr__", [](const TraceRecord& r) {
        return absl::StrCat("TraceRecord(model_name=", Repr(py::str(r.metadata.model_name)),
                            ", layers=", r.layers.size(), ", warnings=", r.warnings.size(), ")");
      });
  AddValueSemantics(cls);

  m.def(
      "read_trace_file",
      [](const py::handle& path) {
        const std::string file = FsPath(path);
        absl::StatusOr<TraceRecord> record;
        {
          py::gil_scoped_release release;
          record = ReadTraceFile(file);
        }
        if (!record.ok()) ThrowStatus(record.status(), file);
        return *std::move(record);
      },
      py::arg("path"), R"doc(
Reads a trace file. FileNotFoundError / PermissionError (with .filename), ValueError naming the path
and, for malformed JSON, the line and column.
)doc");
  m.def(
      "write_trace_file",
      [](const py::handle& path, const TraceRecord& record, int indent) {
        if (indent < 0) throw py::value_error("indent must be >= 0");
        const std::string file = FsPath(path);
        TraceRecord copy = record;  // The caller may change `record` once the GIL is released.
        absl::Status status;
        {
          py::gil_scoped_release release;
          status = WriteTraceFile(file, copy, JsonStyle{.indent = indent});
        }
        if (!status.ok()) ThrowStatus(status, file);
      },
      py::arg("path"), py::arg("record"), py::arg("indent") = 2, R"doc(
Writes `record` to `path` atomically (a concurrent reader sees the old or the new file, never a
partial one). FileNotFoundError when the directory does not exist, PermissionError, or RuntimeError.
)doc");
}

// The analyses; bound after the classes so that their signatures name the Python types.
void BindAnalyses(py::module_& m) {
  m.def(
      "detect_anomalies",
      [](const TraceRecord& record, const std::optional<Thresholds>& thresholds) {
        absl::StatusOr<std::vector<Anomaly>> found =
            DetectAnomalies(record, thresholds.value_or(Thresholds{}));
        if (!found.ok()) ThrowStatus(found.status());
        return *std::move(found);
      },
      py::arg("record"), py::arg("thresholds") = py::none(), R"doc(
Returns the anomalies of `record` as a list of Anomaly (record.warnings is ignored). ValueError when
`thresholds` is invalid.
)doc");

  const DiffThresholds defaults;
  m.def(
      "diff_records",
      [](const TraceRecord& baseline, const TraceRecord& current, double latency_threshold,
         double grad_norm_threshold, double std_threshold) {
        const DiffThresholds thresholds{
            .latency = latency_threshold, .grad_norm = grad_norm_threshold, .std = std_threshold};
        if (absl::Status s = thresholds.Validate(); !s.ok()) ThrowStatus(s);
        return DiffRecords(baseline, current, thresholds);
      },
      py::arg("baseline"), py::arg("current"), py::kw_only(),
      py::arg("latency_threshold") = defaults.latency,
      py::arg("grad_norm_threshold") = defaults.grad_norm, py::arg("std_threshold") = defaults.std,
      R"doc(
Compares two traces, matching layers by full_name. Thresholds are relative changes (0.1 = 10%);
ValueError when one is negative or not finite.
)doc");
}

}  // namespace

void BindRecord(py::module_& m) {
  PyGlobals& globals = Globals();
  py::module_ json = py::module_::import("json");
  globals.json_loads = py::object(json.attr("loads")).release();
  globals.json_dumps = py::object(json.attr("dumps")).release();
  globals.os_fspath = py::object(py::module_::import("os").attr("fspath")).release();

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

  BindTensor(m);
  BindMetadata(m);
  BindLayer(m);
  BindAnomaly(m);
  BindDiff(m);
  BindTraceRecord(m);
  BindAnalyses(m);
}

}  // namespace tracetorch::python
