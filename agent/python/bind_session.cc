#include "agent/python/bind_session.h"

#include <c10/util/SmallVector.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/flight_setup.h"
#include "agent/python/record_convert.h"
#include "agent/python/status_translate.h"
#include "agent/session.h"
#include "agent/stats.h"
#include "agent/summary.h"
#include "agent/tracer.h"
#include "client/daemon_client.h"
#include "guest/hook_guard.h"
#include "protocol/address.h"
#include "trace/anomaly.h"
#include "trace/json.h"

namespace tracetorch::python {
namespace {

namespace py = pybind11;
using agent::Tracer;

constexpr int kMaxNesting = 16;       // Containers deeper than this are not searched.
constexpr size_t kMaxTensors = 4096;  // Per call; more are ignored.

using TensorList = c10::SmallVector<at::Tensor, 8>;

// Appends the tensors in `obj` (a tensor, or tuples/lists/dicts of them, nested) in order.
void Flatten(PyObject* obj, int depth, TensorList* out) {
  if (out->size() >= kMaxTensors) return;
  if (THPVariable_CheckExact(obj)) {
    out->push_back(THPVariable_Unpack(obj));
    return;
  }
  if (PyTuple_Check(obj)) {
    if (depth >= kMaxNesting) return;
    const Py_ssize_t n = PyTuple_GET_SIZE(obj);
    for (Py_ssize_t i = 0; i < n; ++i) Flatten(PyTuple_GET_ITEM(obj, i), depth + 1, out);
    return;
  }
  if (PyList_Check(obj)) {
    if (depth >= kMaxNesting) return;
    // Items are read one by one: the list cannot change under us (we hold the GIL, call no Python).
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(obj); ++i) {
      Flatten(PyList_GET_ITEM(obj, i), depth + 1, out);
    }
    return;
  }
  if (PyDict_Check(obj)) {
    if (depth >= kMaxNesting) return;
    Py_ssize_t pos = 0;
    PyObject* key;
    PyObject* value;
    while (PyDict_Next(obj, &pos, &key, &value)) Flatten(value, depth + 1, out);
    return;
  }
  if (obj == Py_None || PyLong_CheckExact(obj) || PyFloat_CheckExact(obj) ||
      PyUnicode_CheckExact(obj) || PyBool_Check(obj)) {
    return;
  }
  // Tensor subclasses (nn.Parameter, user subclasses).
  const int is_tensor = THPVariableClass ? PyObject_IsInstance(obj, THPVariableClass) : 0;
  if (is_tensor == 1) {
    out->push_back(THPVariable_Unpack(obj));
  } else if (is_tensor < 0) {
    PyErr_Clear();
  }
}

Thresholds ToThresholds(const py::handle& obj) {
  if (obj.is_none()) return Thresholds{};
  if (py::isinstance<py::dict>(obj)) {
    Thresholds t;
    for (auto item : py::reinterpret_borrow<py::dict>(obj)) {
      const std::string key = py::cast<std::string>(item.first);
      const double value = py::cast<double>(item.second);
      if (key == "dead_layer_mean") {
        t.dead_layer_mean = value;
      } else if (key == "dead_layer_std") {
        t.dead_layer_std = value;
      } else if (key == "exploding_variance_std") {
        t.exploding_variance_std = value;
      } else if (key == "high_variance_min") {
        t.high_variance_min = value;
      } else if (key == "variance_spike_ratio") {
        t.variance_spike_ratio = value;
      } else {
        throw py::value_error(absl::StrCat("unknown threshold '", key, "'"));
      }
    }
    return t;
  }
  try {
    return py::cast<Thresholds>(obj);
  } catch (const py::cast_error&) {
    throw py::type_error("thresholds must be a tracetorch.Thresholds, a dict or None");
  }
}

TraceMetadata ToMetadata(const py::dict& d) {
  TraceMetadata m;
  auto str = [&](const char* key, std::string* out) {
    if (d.contains(key) && !d[key].is_none()) *out = py::str(d[key]);
  };
  str("model_name", &m.model_name);
  str("pytorch_version", &m.pytorch_version);
  str("python_version", &m.python_version);
  str("platform", &m.platform);
  str("cuda_version", &m.cuda_version);
  str("active_device", &m.active_device);
  if (d.contains("cuda_available")) m.cuda_available = py::cast<bool>(d["cuda_available"]);
  return m;
}

// The Python door over agent::Session (agent/session.h), which owns the tracer, the daemon stream,
// the flight recorder, the watch flusher and the op watch, and the order they start and stop in.
// This class adds what is Python's: flattening the hooks' arguments into tensors, the module calls
// open in an op watch's step, Python's errors (ThrowStatus) and the GIL (released around every
// call that may wait: the stream's close, the flusher's join). Called with the GIL held (pybind11
// methods); the flusher thread only touches the Tracer, which is thread-safe.
class SessionEngine {
 public:
  explicit SessionEngine(std::unique_ptr<agent::Session> session)
      : session_(std::move(session)), tracer_(session_->tracer()) {}
  ~SessionEngine() {
    if (!session_->streaming()) return;  // The flusher's join never needs the GIL.
    py::gil_scoped_release release;
    session_.reset();  // Closes the stream with a bounded wait (inert in a forked child).
  }

  // Streams the next start()..finish() block to the daemon at `address` (a socket path or
  // unix:// address), with `metadata` as its identity. Does not wait for the daemon. ValueError
  // for a malformed address. REQUIRES: not active.
  void ConnectDaemon(const std::string& address, const py::dict& metadata) {
    const TraceMetadata identity = ToMetadata(metadata);
    absl::Status s;
    {
      py::gil_scoped_release release;  // Closes a stream still open (bounded wait).
      s = session_->ConnectDaemon(address, identity);
    }
    if (!s.ok()) ThrowStatus(s);
  }

  // Detaches the sink and closes the daemon stream (End with total time and hook errors), waiting
  // at most `wait_s` seconds with the GIL released. Returns whether everything reached the daemon.
  // No-op (true) without a stream.
  bool CloseStream(double wait_s, std::optional<double> total_time_ms = std::nullopt) {
    py::gil_scoped_release release;
    return session_->CloseStream(absl::Seconds(std::max(0.0, wait_s)), total_time_ms).ok();
  }

  // {"connected", "session_id", "enqueued_events", "sent_events", "dropped_events", "connects",
  //  "connect_failures", "last_error", "resent_events", "durable_events", "replay_held_events",
  //  "replay_evicted_events", "refused_handshakes", "not_durable_events"} of the current (or last
  // closed) stream (client::DaemonClientStats); None if never.
  py::object DaemonStats() const {
    std::optional<agent::StreamStats> stream = session_->stream_stats();
    if (!stream) return py::none();
    const client::DaemonClientStats& stats = stream->client;
    py::dict d;
    d["connected"] = stats.connected;
    d["session_id"] = stream->session_id;
    d["enqueued_events"] = stats.enqueued_events;
    d["sent_events"] = stats.sent_events;
    d["dropped_events"] = stats.dropped_events;
    d["connects"] = stats.connects;
    d["connect_failures"] = stats.connect_failures;
    d["last_error"] = stats.last_error;
    d["resent_events"] = stats.resent_events;
    d["durable_events"] = stats.durable_events;
    d["replay_held_events"] = stats.replay_held_events;
    d["replay_evicted_events"] = stats.replay_evicted_events;
    d["not_durable_events"] = stats.not_durable_events;
    d["refused_handshakes"] = stats.refused_handshakes;
    return d;
  }

  int DeclareLayer(const std::string& name, const std::string& type, const std::string& full_name,
                   int depth, int64_t params) {
    absl::StatusOr<Tracer::LayerId> id =
        tracer_.DeclareLayer(LayerInfo{name, type, full_name, depth, params});
    if (!id.ok()) ThrowStatus(id.status());
    if (*id >= 0) {
      if (static_cast<size_t>(*id) >= modules_.size()) modules_.resize(*id + 1);
      modules_[*id] = ModuleInfo{full_name, type, params};
    }
    return *id;
  }

  // ops="on_nan" for the next start()..finish() block (agent/ops/nan_op_watch.h): `params` is a
  // list of (name, tensor, is_buffer) the ops may read, `root_type` the model's class name.
  // root_type None: no op recording.
  // REQUIRES: not active.
  void SetOps(const std::string& model_name, py::object root_type, py::object params) {
    ops_stack_.clear();
    std::optional<agent::OpsOptions> ops;
    if (!root_type.is_none()) {
      ops.emplace();
      ops->model_name = model_name;
      ops->root_type = py::cast<std::string>(root_type);
      ops->source = "eager";
      for (py::handle item : params) {
        auto t = py::reinterpret_borrow<py::tuple>(item);
        ops->parameters.push_back(agent::OpsOptions::Parameter{
            py::cast<std::string>(t[0]), THPVariable_Unpack(t[1].ptr()), py::cast<bool>(t[2])});
      }
    }
    if (absl::Status s = session_->SetOps(std::move(ops)); !s.ok()) ThrowStatus(s);
  }

  // {"recorded_steps", "skipped_steps", "kept_step"} of the op watch; None without ops.
  py::object OpsStats() const {
    std::optional<agent::OpsStats> stats = session_->ops_stats();
    if (!stats) return py::none();
    py::dict d;
    d["recorded_steps"] = stats->recorded_steps;
    d["skipped_steps"] = stats->skipped_steps;
    d["kept_step"] = stats->kept_step ? py::cast(*stats->kept_step) : py::none();
    return d;
  }

  void SetMetadata(const py::dict& metadata) { tracer_.SetMetadata(ToMetadata(metadata)); }

  // The optimizer's step begins ("optimizer") or ends ("outside"): the flight position's phase.
  void MarkPhase(const std::string& phase) {
    std::optional<flight::Phase> p = agent::ParsePhase(phase);
    if (!p) throw py::value_error(absl::StrCat("unknown phase '", phase, "'"));
    tracer_.MarkPhase(*p);
  }

  // Whether this session has a flight recorder (flight/layout.h).
  bool has_flight_recorder() const { return session_->has_flight_recorder(); }

  void Start() {
    if (absl::Status s = session_->Start(); !s.ok()) ThrowStatus(s);
    ops_stack_.clear();
  }

  void StartWatch(const std::string& path, double interval_s) {
    absl::Status s;
    {
      py::gil_scoped_release release;  // Stops a flusher already running (joins its thread).
      s = session_->StartWatch(path, absl::Seconds(interval_s));
    }
    if (!s.ok()) ThrowStatus(s);
  }

  void StopWatch() {
    py::gil_scoped_release release;  // The flusher never needs the GIL; don't hold it joining.
    session_->StopWatch();
  }

  // Ends the `with` block (agent::Session::Finish: stops recording, closes the stream, finalises
  // the record and writes the final watch file). Never raises: the user's exception (if any) must
  // win; a failure is counted in hook_errors.
  void Finish(std::optional<double> total_time_ms) {
    py::gil_scoped_release release;
    (void)session_->Finish(total_time_ms);
  }

  // ---- Hot path ----------------------------------------------------------------------------
  // The module-call hooks (session.py's _TracedForward): never raise into the user's forward.
  int64_t Pre(int layer, bool is_root, py::handle args, py::handle kwargs) {
    Tracer::CallId call = Tracer::kNoCall;
    guest::GuardHook(tracer_.errors(), "pre_hook", [&] {
      TensorList tensors;
      Flatten(args.ptr(), 0, &tensors);
      if (kwargs.ptr() != nullptr && !kwargs.is_none()) Flatten(kwargs.ptr(), 0, &tensors);
      call = tracer_.BeginCall(layer, is_root, tensors);
      if (session_->op_watch() != nullptr && call != Tracer::kNoCall) {
        OpsPre(layer, is_root, call, tensors);
      }
    });
    return call;
  }

  void Post(int64_t call, py::handle output) {
    if (call == Tracer::kNoCall) return;
    const bool ok = guest::GuardHook(tracer_.errors(), "post_hook", [&] {
      TensorList tensors;
      Flatten(output.ptr(), 0, &tensors);
      tracer_.EndCall(call, tensors);
      if (!ops_stack_.empty()) OpsPost(call, &tensors);
    });
    if (!ok) {
      tracer_.AbortCall(call);
      if (!ops_stack_.empty()) OpsPost(call, nullptr);
    }
  }

  void Abort(int64_t call) {
    tracer_.AbortCall(call);
    if (!ops_stack_.empty()) {
      guest::GuardHook(tracer_.errors(), "ops_abort", [&] { OpsPost(call, nullptr); });
    }
  }

  // ---- Results -----------------------------------------------------------------------------
  TraceRecord Record() const { return session_->Snapshot(); }

  std::vector<Anomaly> Anomalies() const {
    if (std::optional<TraceRecord> final_record = session_->finished_record()) {
      return std::move(final_record->warnings);
    }
    absl::StatusOr<std::vector<Anomaly>> a =
        DetectAnomalies(tracer_.Snapshot(), tracer_.options().thresholds);
    if (!a.ok()) ThrowStatus(a.status());
    return *std::move(a);
  }

  // The finished record, or (inside the `with` block) the trace so far with its anomalies.
  TraceRecord RecordForExport() const {
    absl::StatusOr<TraceRecord> r = session_->Current();
    if (!r.ok()) ThrowStatus(r.status());
    return *std::move(r);
  }

  void Write(const std::string& path) const {
    const TraceRecord record = RecordForExport();
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = WriteTraceFile(path, record);
    }
    if (!s.ok()) ThrowStatus(s, path);
  }

  std::string RecordJson(int indent) const {
    return TraceToJson(RecordForExport(), JsonStyle{.indent = std::max(0, indent)});
  }

  std::string Summary() const {
    return agent::SessionSummary(RecordForExport(), tracer_.steps(), tracer_.hook_errors());
  }

  bool active() const { return session_->active(); }
  int64_t steps() const { return tracer_.steps(); }
  int64_t hook_errors() const { return tracer_.hook_errors(); }

 private:
  struct ModuleInfo {
    std::string path;
    std::string type;
    int64_t params = 0;
  };
  struct OpenCall {
    int64_t call = 0;
    int32_t pass = -1;  // The watch's pass (-1: none).
    bool root = false;  // The root call: the watch's step.
  };

  // A module call begins while ops are watched: the root starts a step, others open a pass.
  void OpsPre(int layer, bool is_root, int64_t call, const TensorList& tensors) {
    if (is_root) {
      if (!ops_stack_.empty()) return;  // A nested root call: part of the open step.
      const std::vector<at::Tensor> inputs(tensors.begin(), tensors.end());
      if (session_->BeginOpsStep(inputs)) ops_stack_.push_back(OpenCall{call, -1, /*root=*/true});
      return;
    }
    if (ops_stack_.empty() || layer < 0 || static_cast<size_t>(layer) >= modules_.size()) return;
    const ModuleInfo& m = modules_[layer];
    const std::vector<at::Tensor> inputs(tensors.begin(), tensors.end());
    ops_stack_.push_back(OpenCall{
        call, session_->op_watch()->PushModule(m.path, m.type, inputs, m.params), /*root=*/false});
  }

  // The call `call` ended with `tensors` (nullptr: it raised). Calls are strictly nested.
  void OpsPost(int64_t call, const TensorList* tensors) {
    if (ops_stack_.back().call != call) return;
    const OpenCall open = ops_stack_.back();
    ops_stack_.pop_back();
    std::vector<at::Tensor> outputs;
    if (tensors != nullptr) outputs.assign(tensors->begin(), tensors->end());
    if (!open.root) {
      session_->op_watch()->PopModule(open.pass, outputs);
      return;
    }
    ops_stack_.clear();
    session_->EndOpsStep(tensors != nullptr ? &outputs : nullptr);
  }

  std::unique_ptr<agent::Session> session_;
  Tracer& tracer_;                   // session_'s.
  std::vector<ModuleInfo> modules_;  // By layer id.
  std::vector<OpenCall> ops_stack_;  // Module calls open in the watched step.
};

py::dict TensorStatsDict(const py::handle& tensor) {
  if (!THPVariable_Check(tensor.ptr())) throw py::type_error("expected a torch.Tensor");
  const at::Tensor t = THPVariable_Unpack(tensor.ptr());
  absl::StatusOr<TensorStats> stats;
  {
    py::gil_scoped_release release;
    stats = agent::ComputeTensorStats(t, agent::StatsMode::kFull);
  }
  if (!stats.ok()) ThrowStatus(stats.status());
  py::dict out;
  out["mean"] = stats->mean;
  out["std"] = stats->std;
  out["min"] = stats->min;
  out["max"] = stats->max;
  out["nan_count"] = stats->nan_count;
  out["inf_count"] = stats->inf_count;
  return out;
}

}  // namespace

void BindSession(py::module_& m) {
  m.def("compute_tensor_stats", &TensorStatsDict, py::arg("tensor"), R"doc(
The statistics the tracer records for `tensor`, in one fused pass over every element (agent/stats.h):
{'mean', 'std', 'min', 'max'} over the finite elements (population std; None for non-float and
empty tensors, and when no element is finite) and {'nan_count', 'inf_count'} over all of them.
)doc");
  m.def(
      "_session_summary",
      [](const TraceRecord& record, const std::string& model_name, const py::handle& anomalies,
         int64_t steps, int64_t hook_errors) {
        TraceRecord shown = record;
        shown.metadata.model_name = model_name;
        shown.warnings = ListFromPy<Anomaly>(anomalies, AnomalyFromPy, "anomalies");
        return agent::SessionSummary(shown, steps, hook_errors);
      },
      py::arg("record"), py::arg("model_name"), py::arg("anomalies"), py::arg("steps") = -1,
      py::arg("hook_errors") = 0,
      "TraceSession.summary()'s text for `record` under `model_name`, listing `anomalies` "
      "(agent/summary.h); steps < 0: forward passes from the layers.");
  m.def(
      "_parse_daemon_address",
      [](const std::string& address) {
        absl::StatusOr<std::string> path = protocol::ParseDaemonAddress(address);
        if (!path.ok()) ThrowStatus(path.status());
        return *path;
      },
      py::arg("address"), "The socket path of a daemon address; ValueError when malformed.");
  py::class_<SessionEngine>(m, "_SessionEngine", R"doc(
The tracing engine behind tracetorch.TraceSession (use that class; this one is its native half).
)doc")
      .def(py::init([](bool capture_stats, py::handle thresholds, const py::dict& metadata) {
             agent::TracerOptions options;
             options.capture_stats = capture_stats;
             options.thresholds = ToThresholds(thresholds);
             // The deferred-collection machinery on CPU (agent/pending_results.h), for tests.
             const char* deferred = std::getenv("TRACETORCH_DEFERRED_STATS");
             options.deferred_cpu = deferred != nullptr && std::string_view(deferred) == "1";
             // The watch file's stall floor (flight/reader.h StallRule), for tests and impatient
             // users: TRACETORCH_STALL_FLOOR_S seconds (default 60).
             if (const char* floor = std::getenv("TRACETORCH_STALL_FLOOR_S"); floor != nullptr) {
               char* end = nullptr;
               const double seconds = std::strtod(floor, &end);
               if (end != floor && seconds > 0) {
                 options.stall_rule.floor = absl::Seconds(seconds);
               }
             }
             agent::SessionOptions session_options;
             session_options.tracer = std::move(options);
             session_options.metadata = ToMetadata(metadata);
             absl::StatusOr<std::unique_ptr<agent::Session>> session =
                 agent::Session::Create(std::move(session_options));
             if (!session.ok()) ThrowStatus(session.status());
             return std::make_unique<SessionEngine>(*std::move(session));
           }),
           py::arg("capture_stats") = true, py::arg("thresholds") = py::none(),
           py::arg("metadata") = py::dict())
      .def("declare_layer", &SessionEngine::DeclareLayer, py::arg("name"), py::arg("type"),
           py::arg("full_name"), py::arg("depth"), py::arg("params"))
      .def("set_metadata", &SessionEngine::SetMetadata, py::arg("metadata"))
      .def("mark_phase", &SessionEngine::MarkPhase, py::arg("phase"))
      .def_property_readonly("has_flight_recorder", &SessionEngine::has_flight_recorder)
      .def("start", &SessionEngine::Start)
      .def("connect_daemon", &SessionEngine::ConnectDaemon, py::arg("address"), py::arg("metadata"))
      .def("close_stream", &SessionEngine::CloseStream, py::arg("wait_s") = 1.0,
           py::arg("total_time_ms") = py::none())
      .def("daemon_stats", &SessionEngine::DaemonStats)
      .def("finish", &SessionEngine::Finish, py::arg("total_time_ms") = py::none())
      .def("set_ops", &SessionEngine::SetOps, py::arg("model_name"), py::arg("root_type"),
           py::arg("params"))
      .def("ops_stats", &SessionEngine::OpsStats)
      .def("start_watch", &SessionEngine::StartWatch, py::arg("path"), py::arg("interval_s"))
      .def("stop_watch", &SessionEngine::StopWatch)
      .def("pre", &SessionEngine::Pre)
      .def("post", &SessionEngine::Post)
      .def("abort", &SessionEngine::Abort)
      .def("record", &SessionEngine::Record)
      .def(
          "fill_record", [](const SessionEngine& e, TraceRecord& out) { out = e.Record(); },
          py::arg("record"), "Replaces `record`'s contents (in place) with the trace.")
      .def(
          "fill_layers",
          [](const SessionEngine& e, TraceRecord& out) { out.layers = e.Record().layers; },
          py::arg("record"), "Replaces `record.layers` (in place) with the trace's layers.")
      .def("anomalies", &SessionEngine::Anomalies)
      .def("record_json", &SessionEngine::RecordJson, py::arg("indent") = 2)
      .def("write", &SessionEngine::Write, py::arg("path"))
      .def("summary", &SessionEngine::Summary)
      .def_property_readonly("active", &SessionEngine::active)
      .def_property_readonly("steps", &SessionEngine::steps)
      .def_property_readonly("hook_errors", &SessionEngine::hook_errors);
}

}  // namespace tracetorch::python
