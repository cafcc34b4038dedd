// Python bindings of the trace data model; see bind_record.h.
//
// Design notes:
//  - Scalar fields are bound in place. List fields (`record.layers`, `layer.outputs`, ...) are
//    returned as Python lists of COPIES: a Python object must never point into a std::vector that a
//    later assignment can reallocate. To change a layer, assign the list back (`record.layers =
//    layers`).
//  - to_dict() and the dict/mapping constructors go through the C++ JSON writer and reader
//    (trace/json.h), so there is one definition of the layout and of its validation.
//  - The enums are Python `enum.StrEnum` classes created here from the C++ ToString() spellings; a
//    custom type caster converts between them (or a plain str) and the C++ enums.
#include "agent/python/bind_record.h"

#include <pybind11/operators.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "agent/python/record_convert.h"
#include "agent/python/status_translate.h"
#include "trace/aggregator.h"
#include "trace/anomaly.h"
#include "trace/json.h"
#include "trace/json_layer_keys.h"
#include "trace/nonfinite.h"
#include "trace/op_graph.h"
#include "trace/op_graph_json.h"
#include "trace/record.h"

namespace tracetorch::python {
namespace {

// ---- TensorStats and TensorInfo ----------------------------------------------------------------

void CheckCount(int64_t value, const char* name) {
  if (value < 0) throw py::value_error(absl::StrCat(name, " must be >= 0, got ", value));
}

template <int64_t TensorStats::*Field>
void DefCount(py::class_<TensorStats>& cls, const char* name, const char* doc) {
  cls.def_property(
      name, [](const TensorStats& s) { return s.*Field; },
      [name](TensorStats& s, int64_t v) {
        CheckCount(v, name);
        s.*Field = v;
      },
      doc);
}

py::object StatsToDict(const TensorStats& stats) {
  TensorInfo tensor;
  tensor.stats = stats;
  py::dict out;
  py::dict full = TensorToDict(tensor);
  for (const char* key : {"mean", "std", "min", "max", "nan_count", "inf_count"}) {
    out[key] = full[key];
  }
  return out;
}

void BindTensor(py::module_& m) {
  py::class_<TensorStats> stats(m, "TensorStats", R"doc(
Statistics of one tensor: mean, population std, min and max over the finite elements (None when not
measured, or for non-float and empty tensors) and the NaN and +/-Inf counts over all of them.

    TensorStats(mean=0.1, std=1.0).to_dict()["std"] == 1.0
)doc");
  stats
      .def(py::init([](std::optional<double> mean, std::optional<double> std,
                       std::optional<double> min, std::optional<double> max, int64_t nan_count,
                       int64_t inf_count) {
             CheckCount(nan_count, "nan_count");
             CheckCount(inf_count, "inf_count");
             return TensorStats{.mean = mean,
                                .std = std,
                                .min = min,
                                .max = max,
                                .nan_count = nan_count,
                                .inf_count = inf_count};
           }),
           py::arg("mean") = py::none(), py::arg("std") = py::none(), py::arg("min") = py::none(),
           py::arg("max") = py::none(), py::arg("nan_count") = 0, py::arg("inf_count") = 0)
      .def_readwrite("mean", &TensorStats::mean, "Mean over finite elements, or None.")
      .def_readwrite("std", &TensorStats::std, "Population std over finite elements, or None.")
      .def_readwrite("min", &TensorStats::min, "Minimum finite element, or None.")
      .def_readwrite("max", &TensorStats::max, "Maximum finite element, or None.");
  DefCount<&TensorStats::nan_count>(stats, "nan_count", "Number of NaN elements.");
  DefCount<&TensorStats::inf_count>(stats, "inf_count", "Number of +/-Inf elements.");
  DefCount<&TensorStats::neg_inf_count>(
      stats, "neg_inf_count",
      "How many of the Inf elements are -Inf (measured when there are some).");
  stats.def_readwrite("finite_all_zero", &TensorStats::finite_all_zero,
                      "Every finite element is 0 (measured for a tensor holding NaN/Inf).");
  stats
      .def("to_dict", &StatsToDict,
           "{'mean', 'std', 'min', 'max', 'nan_count', 'inf_count'}; a non-finite value is None.")
      .def("__repr__", [](const TensorStats& s) {
        return absl::StrCat("TensorStats(mean=", OptRepr(s.mean), ", std=", OptRepr(s.std),
                            ", min=", OptRepr(s.min), ", max=", OptRepr(s.max),
                            ", nan_count=", s.nan_count, ", inf_count=", s.inf_count, ")");
      });
  AddValueSemantics(stats);

  py::class_<TensorInfo> info(m, "TensorInfo", R"doc(
One input or output tensor of a layer call: shape, dtype, device and, when they were captured, its
statistics (``stats``, a TensorStats, or None).

With ``capture_stats=False`` a session captures no statistics (``stats`` is None) but still counts
NaN and Inf values: ``nan_count`` and ``inf_count`` read them (from ``stats`` when it is set).

    t = TensorInfo([16, 64], "torch.float32", "cpu", stats=TensorStats(mean=0.1, std=1.0))
    t.stats.std == 1.0
)doc");
  info.def(py::init([](std::vector<int64_t> shape, std::string dtype, std::string device,
                       std::optional<TensorStats> stats) {
             return TensorInfo{.shape = std::move(shape),
                               .dtype = std::move(dtype),
                               .device = std::move(device),
                               .stats = std::move(stats)};
           }),
           py::arg("shape"), py::arg("dtype"), py::arg("device") = "",
           py::arg("stats") = py::none())
      .def_readwrite("shape", &TensorInfo::shape, "list[int]")
      .def_readwrite("dtype", &TensorInfo::dtype, "As torch prints it: 'torch.float32'.")
      .def_readwrite("device", &TensorInfo::device, "'cpu', 'cuda:0'; '' when unknown.")
      .def_property(
          "stats", [](const TensorInfo& t) { return t.stats; },
          [](TensorInfo& t, std::optional<TensorStats> stats) {
            t.stats = std::move(stats);
            if (t.stats) t.nonfinite.reset();  // The statistics hold the counts.
          },
          "TensorStats | None (a copy: assign to change it).")
      .def_property_readonly(
          "nan_count", [](const TensorInfo& t) { return NanCount(t); },
          "NaN elements, from stats or, without them, from the counts taken anyway; 0 if neither.")
      .def_property_readonly(
          "inf_count", [](const TensorInfo& t) { return InfCount(t); },
          "+/-Inf elements, like nan_count.")
      .def_property_readonly(
          "is_mask", [](const TensorInfo& t) { return IsMask(t); },
          "A mask: its only non-finite values are -Inf and its finite ones are all 0 "
          "(trace/nonfinite.h); its Infs are no anomaly.")
      .def("to_dict", &TensorToDict,
           "The JSON layout of this tensor entry (statistics flattened into it), as a dict.")
      .def("__repr__", [](const TensorInfo& t) {
        std::string out =
            absl::StrCat("TensorInfo(shape=", Repr(py::cast(t.shape)),
                         ", dtype=", Repr(py::str(t.dtype)), ", device=", Repr(py::str(t.device)),
                         ", stats=", t.stats ? Repr(py::cast(*t.stats)) : "None");
        if (t.nonfinite) {
          absl::StrAppend(&out, ", nan_count=", t.nonfinite->nan_count,
                          ", inf_count=", t.nonfinite->inf_count);
        }
        return out + ")";
      });
  AddValueSemantics(info);
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

// A value that is not JSON (a torch.device, a Path) is stored as its str(), as the library's
// export writes it.
std::string MinifiedJson(const py::handle& value, const std::string& key) {
  try {
    return Globals()
        .json_dumps(value, py::arg("separators") = py::make_tuple(",", ":"),
                    py::arg("allow_nan") = false, py::arg("default") = Globals().builtin_str)
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
      .def_readwrite("op", &NanOrigin::op, "The origin op's label (ops='on_nan'), or ''.")
      .def_readwrite("op_func", &NanOrigin::op_func, "The origin op's func_name, or ''.")
      .def_readwrite("op_module", &NanOrigin::op_module, "The origin op's module address, or ''.")
      .def_readwrite("backward", &NanOrigin::backward,
                     "It first appeared in the backward (a gradient) of that step.")
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
                            ", kind='", o.is_nan ? "nan" : "inf", "'",
                            o.op.empty() ? "" : absl::StrCat(", op=", Repr(py::str(o.op))), ")");
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

// The library's dataclass field order, for positional arguments: the JSON's key order, with the
// dataclass's name for the one key it spells differently.
std::vector<std::string_view> LayerFieldOrder() {
  const absl::Span<const std::string_view> keys = LayerJsonKeys();
  std::vector<std::string_view> order(keys.begin(), keys.end());
  for (std::string_view& key : order) {
    if (key == "type") key = "module_type";
  }
  return order;
}

constexpr const char* kMemDoc =
    "CUDA allocator delta in bytes over the latest call (a float, as the library has it; a "
    "fraction is rounded to a whole byte), or None on CPU.";

template <std::optional<int64_t> LayerTrace::*Field>
std::optional<double> MemGet(const LayerTrace& l) {
  const std::optional<int64_t>& v = l.*Field;
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

template <std::optional<int64_t> LayerTrace::*Field>
void MemSet(LayerTrace& l, std::optional<double> bytes) {
  if (!bytes) {
    (l.*Field).reset();
    return;
  }
  if (!std::isfinite(*bytes) || std::fabs(*bytes) >= 9.2e18) {
    throw py::value_error(absl::StrCat("a memory delta must be a finite byte count, got ", *bytes));
  }
  l.*Field = std::llround(*bytes);
}

void BindLayer(py::module_& m) {
  py::class_<LayerTrace> cls(m, "LayerTrace", R"doc(
Everything recorded for one module, aggregated over its calls. Unmeasured values are None.
``inputs`` and ``outputs`` (lists of TensorStats, of the latest call) are copies: assign a list to
change them. Construct with keyword arguments named like the attributes.
)doc");
  cls.def(py::init([](const py::args& args, const py::kwargs& kwargs) {
       static const std::vector<std::string_view> order = LayerFieldOrder();
       return FromArgs<LayerTrace>(args, kwargs, order, "LayerTrace");
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
      .def_property(
          "latency_ms", [](const LayerTrace& l) { return l.latency_ms.value_or(0.0); },
          [](LayerTrace& l, std::optional<double> v) { l.latency_ms = v; },
          "The latest forward's latency; 0.0 before any (as the library has it).")
      .def_readwrite("latency_ms_min", &LayerTrace::latency_ms_min)
      .def_readwrite("latency_ms_max", &LayerTrace::latency_ms_max)
      .def_readwrite("latency_ms_mean", &LayerTrace::latency_ms_mean)
      .def_readwrite("forward_count", &LayerTrace::forward_count)
      .def_readwrite("has_nan", &LayerTrace::has_nan)
      .def_readwrite("has_inf", &LayerTrace::has_inf)
      .def_readwrite("inf_in_masks_only", &LayerTrace::inf_in_masks_only,
                     "With has_inf: every Inf the outputs held was inside a mask (no anomaly).")
      .def_readwrite("grad_norm", &LayerTrace::grad_norm)
      .def_readwrite("grad_mean", &LayerTrace::grad_mean)
      .def_readwrite("grad_has_nan", &LayerTrace::grad_has_nan)
      .def_readwrite("has_zero_grad", &LayerTrace::has_zero_grad)
      .def_readwrite("grad_in_norm", &LayerTrace::grad_in_norm)
      .def_readwrite("grad_in_mean", &LayerTrace::grad_in_mean)
      .def_readwrite("grad_in_has_nan", &LayerTrace::grad_in_has_nan)
      .def_property(
          "bwd_latency_ms", [](const LayerTrace& l) { return l.bwd_latency_ms.value_or(0.0); },
          [](LayerTrace& l, std::optional<double> v) { l.bwd_latency_ms = v; },
          "The latest backward's latency; 0.0 without a backward (as the library has it).")
      .def_readwrite("bwd_latency_ms_min", &LayerTrace::bwd_latency_ms_min)
      .def_readwrite("bwd_latency_ms_max", &LayerTrace::bwd_latency_ms_max)
      .def_readwrite("bwd_latency_ms_mean", &LayerTrace::bwd_latency_ms_mean)
      .def_readwrite("backward_count", &LayerTrace::backward_count)
      .def_property("fwd_mem_alloc_delta", &MemGet<&LayerTrace::fwd_mem_alloc_delta>,
                    &MemSet<&LayerTrace::fwd_mem_alloc_delta>, kMemDoc)
      .def_property("fwd_mem_reserved_delta", &MemGet<&LayerTrace::fwd_mem_reserved_delta>,
                    &MemSet<&LayerTrace::fwd_mem_reserved_delta>, kMemDoc)
      .def_property("bwd_mem_alloc_delta", &MemGet<&LayerTrace::bwd_mem_alloc_delta>,
                    &MemSet<&LayerTrace::bwd_mem_alloc_delta>, kMemDoc)
      .def_property("bwd_mem_reserved_delta", &MemGet<&LayerTrace::bwd_mem_reserved_delta>,
                    &MemSet<&LayerTrace::bwd_mem_reserved_delta>, kMemDoc)
      .def_readwrite("module_type", &LayerTrace::type, "Alias of `type` (the library's name).")
      .def(
          "record_latency",
          [](LayerTrace& l, double latency_ms) { RecordForwardLatency(latency_ms, &l); },
          py::arg("latency_ms"), "Folds one forward latency into latency_ms*, forward_count.")
      .def(
          "record_backward_latency",
          [](LayerTrace& l, double latency_ms) { RecordBackwardLatency(latency_ms, &l); },
          py::arg("latency_ms"), "Folds one backward latency into bwd_latency_ms*, backward_count.")
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

// An AnomalyType, or any str: a spelling this version does not know is kept as it is (kUnknown),
// as the reader keeps it.
void SetAnomalyType(Anomaly& a, const py::handle& type) {
  if (!PyUnicode_Check(type.ptr())) throw py::type_error("type must be an AnomalyType or a str");
  std::string text = type.cast<std::string>();
  AnomalyType parsed;
  if (ParseAnomalyType(text, &parsed)) {
    a.type = parsed;
    a.unknown_type.clear();
  } else {
    a.type = AnomalyType::kUnknown;
    a.unknown_type = std::move(text);
  }
}

// The AnomalyType, or the plain str of a type this version does not know.
py::object GetAnomalyType(const Anomaly& a) {
  if (a.type == AnomalyType::kUnknown) return py::str(a.unknown_type);
  return py::cast(a.type);
}

void BindAnomaly(py::module_& m) {
  py::class_<Anomaly> cls(m, "Anomaly", R"doc(
One finding of detect_anomalies. ``type`` and ``severity`` are AnomalyType / AnomalySeverity (a str
with the JSON spelling is accepted where one is expected); ``details`` is a dict (a copy). Also
readable as a dict (``a["message"]``, ``a.get("details")``), as the library's warnings were.
)doc");
  cls.def(py::init([](const py::object& type, AnomalySeverity severity, std::string layer,
                      std::string message, const py::object& details) {
            Anomaly a{.severity = severity,
                      .layer = std::move(layer),
                      .message = std::move(message),
                      .details = DetailsFromPy(details)};
            SetAnomalyType(a, type);
            return a;
          }),
          py::arg("type"), py::arg("severity"), py::arg("layer") = "", py::arg("message") = "",
          py::arg("details") = py::none())
      .def_property("type", &GetAnomalyType, &SetAnomalyType,
                    "AnomalyType; a plain str for a type this version does not know (kept from a "
                    "file written by another tool).")
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
        return absl::StrCat("Anomaly(type='", Str(TypeName(a)), "', severity='",
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
           py::arg("dead_layer_mean") = defaults.dead_layer_mean,
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
      .def_property(
          "op_graph_json",
          [](const TraceRecord& r) {
            return r.op_graph != nullptr ? OpGraphToJson(*r.op_graph, 0) : std::string();
          },
          [](TraceRecord& r, std::string_view text) {
            if (text.empty()) {
              r.op_graph.reset();
              return;
            }
            absl::StatusOr<OpGraph> graph = ParseOpGraphJson(text);
            if (!graph.ok()) ThrowStatus(graph.status());
            r.op_graph = std::make_shared<const OpGraph>(*std::move(graph));
          },
          "The op graph kept at the NaN origin (ops='on_nan'), as JSON text (the minified "
          "trace/op_graph_json.h document); '' if none. Setting text that is not an op graph "
          "raises ValueError.")
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
  m.def("_describe_unknown_anomaly_types", &DescribeUnknownAnomalyTypes, py::arg("record"),
        "What a reader says of the record's warnings of unknown type ('' when none).");
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
partial one). FileNotFoundError when the directory does not exist, PermissionError (both with
.filename), OSError when the disk is full, RuntimeError for other I/O failures.
)doc");
}

}  // namespace

void BindRecord(py::module_& m) {
  InitRecordConvert(m);
  BindStatusTranslate(m);
  BindTensor(m);
  BindMetadata(m);
  BindLayer(m);
  BindAnomaly(m);
  BindTraceRecord(m);
}

}  // namespace tracetorch::python
