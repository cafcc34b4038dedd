#include "tracetorch/trace_session.h"

#include <ATen/Context.h>
#include <sys/utsname.h>
#include <torch/csrc/api/include/torch/nn/module.h>
#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/jit/api/module.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/daemon_sink.h"
#include "agent/flight_setup.h"
#include "agent/libtorch/capture_engine.h"
#include "agent/libtorch/module_tree.h"
#include "agent/summary.h"
#include "agent/tracer.h"
#include "agent/watch_flusher.h"
#include "client/daemon_client.h"
#include "guest/log.h"
#include "protocol/address.h"
#include "protocol/events.h"
#include "trace/format.h"
#include "trace/json.h"

namespace tracetorch {

using libtorch_internal::CaptureEngine;
using libtorch_internal::ModuleTree;

struct TraceSession::Impl {
  // Constant after Create().
  std::shared_ptr<agent::Tracer> tracer;
  std::shared_ptr<flight::Recorder> recorder;  // Null: none (agent/flight_setup.h).
  std::shared_ptr<CaptureEngine> engine;
  TraceSessionOptions options;
  TraceMetadata metadata;

  // Touched by Start()/Stop() (the owner thread) and read by the accessors.
  mutable absl::Mutex mu;
  bool active ABSL_GUARDED_BY(mu) = false;
  std::thread::id owner ABSL_GUARDED_BY(mu);
  std::chrono::steady_clock::time_point started ABSL_GUARDED_BY(mu);
  std::unique_ptr<agent::WatchFlusher> flusher ABSL_GUARDED_BY(mu);
  std::shared_ptr<agent::DaemonSink> sink ABSL_GUARDED_BY(mu);
  std::optional<TraceRecord> final_record ABSL_GUARDED_BY(mu);

  // The engine over `tree` (either kind of module): metadata, tracer, declared layers. Throws what
  // libtorch throws; Create() catches it.
  static absl::StatusOr<std::unique_ptr<Impl>> Make(ModuleTree tree,
                                                    std::optional<c10::Device> device,
                                                    CaptureEngine::Mode mode,
                                                    const void* script_self,
                                                    const TraceSessionOptions& options);

  // The finished record, or the trace so far with its anomalies.
  absl::StatusOr<TraceRecord> Current() const {
    {
      absl::MutexLock lock(&mu);
      if (final_record.has_value()) return *final_record;
    }
    absl::StatusOr<TraceRecord> r = tracer->Finalize(std::nullopt);
    if (r.ok()) Decorate(&*r);
    return r;
  }

  // ops = kOnNan: the kept op graph and the origin op it names.
  void Decorate(TraceRecord* record) const {
    std::shared_ptr<const CaptureEngine::KeptOps> kept = engine->kept_ops();
    if (kept == nullptr) return;
    if (record->metadata.nan_origin) kept->origin.Annotate(&*record->metadata.nan_origin);
    record->op_graph = kept->graph;
  }
};

namespace {

std::string PlatformString() {
  struct utsname u;
  if (uname(&u) != 0) return "unknown";
  return absl::StrCat(u.sysname, "-", u.release, "-", u.machine);
}

TraceMetadata MakeMetadata(const TraceSessionOptions& options, const std::string& type_name,
                           std::optional<c10::Device> device) {
  TraceMetadata m;
  m.model_name = options.model_name.empty() ? type_name : options.model_name;
  m.pytorch_version = TORCH_VERSION;
  m.python_version = "N/A";
  m.platform = PlatformString();
  m.cuda_available = at::hasCUDA();
  m.cuda_version = "N/A";
  m.active_device = device.has_value() ? device->str() : "cpu";
  m.extra.emplace_back("front_door", "\"libtorch\"");
  return m;
}

// The device of the module's first parameter, if it has any (torch::jit or torch::nn module).
template <typename M>
std::optional<c10::Device> FirstParameterDevice(const M& module) {
  for (const auto& p : module.parameters(/*recurse=*/true)) return p.device();
  return std::nullopt;
}

constexpr absl::Duration kDaemonCloseWait = absl::Seconds(1);

absl::Status ValidateOptions(const TraceSessionOptions& options) {
  if (options.ops != OpCapture::kOff && options.ops != OpCapture::kOnNan) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown ops mode ", static_cast<int>(options.ops)));
  }
  if (!options.daemon_address.empty()) {
    if (absl::StatusOr<std::string> a = protocol::ParseDaemonAddress(options.daemon_address);
        !a.ok()) {
      return a.status();
    }
  }
  if (!options.watch_path.empty() && options.watch_interval < agent::WatchFlusher::kMinInterval) {
    return absl::InvalidArgumentError(absl::StrCat(
        "watch_interval must be at least ", absl::FormatDuration(agent::WatchFlusher::kMinInterval),
        ", got ", absl::FormatDuration(options.watch_interval)));
  }
  return options.thresholds.Validate();
}

}  // namespace

TraceSession::TraceSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<TraceSession>> TraceSession::Finish(
    std::unique_ptr<Impl> impl, const TraceSessionOptions& options) {
  impl->options = options;
  return std::unique_ptr<TraceSession>(new TraceSession(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<TraceSession::Impl>> TraceSession::Impl::Make(
    ModuleTree tree, std::optional<c10::Device> device, CaptureEngine::Mode mode,
    const void* script_self, const TraceSessionOptions& options) {
  TraceMetadata metadata = MakeMetadata(options, tree.root_type(), device);
  agent::TracerOptions tracer_options;
  tracer_options.capture_stats = options.capture_stats;
  tracer_options.thresholds = options.thresholds;
  absl::StatusOr<std::shared_ptr<agent::Tracer>> tracer =
      agent::Tracer::Create(std::move(tracer_options), metadata);
  if (!tracer.ok()) return tracer.status();
  if (absl::Status s = tree.DeclareLayers(**tracer); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->tracer = *tracer;
  impl->recorder = agent::MakeFlightRecorder();
  impl->tracer->SetFlightRecorder(impl->recorder);
  impl->metadata = std::move(metadata);
  impl->engine = std::make_shared<CaptureEngine>(*tracer, std::move(tree), mode, script_self);
  return impl;
}

absl::StatusOr<std::unique_ptr<TraceSession>> TraceSession::Create(const torch::jit::Module& module,
                                                                   TraceSessionOptions options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  try {
    absl::StatusOr<std::unique_ptr<Impl>> impl =
        Impl::Make(ModuleTree::FromScript(module), FirstParameterDevice(module),
                   CaptureEngine::Mode::kTorchScript, module._ivalue().get(), options);
    if (!impl.ok()) return impl.status();
    return Finish(*std::move(impl), options);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the TorchScript module: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<TraceSession>> TraceSession::Create(const torch::nn::Module& module,
                                                                   TraceSessionOptions options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  try {
    absl::StatusOr<std::unique_ptr<Impl>> impl =
        Impl::Make(ModuleTree::FromCpp(module), FirstParameterDevice(module),
                   CaptureEngine::Mode::kCppFrontend, nullptr, options);
    if (!impl.ok()) return impl.status();
    return Finish(*std::move(impl), options);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read the module: ", e.what()));
  }
}

TraceSession::~TraceSession() {
  bool active;
  bool same_thread;
  {
    absl::MutexLock lock(&impl_->mu);
    active = impl_->active;
    same_thread = impl_->owner == std::this_thread::get_id();
  }
  if (!active) return;
  if (same_thread) {
    (void)Stop();
    return;
  }
  // Only the starting thread can remove its callbacks: make them inert instead.
  impl_->engine->Abandon();
  std::unique_ptr<agent::WatchFlusher> flusher;
  std::shared_ptr<agent::DaemonSink> sink;  // Closes (bounded wait) when this scope ends.
  {
    absl::MutexLock lock(&impl_->mu);
    flusher = std::move(impl_->flusher);
    sink = std::move(impl_->sink);
    impl_->active = false;
  }
  if (flusher != nullptr) flusher->Stop();
  impl_->tracer->SetEventSink(nullptr);
  impl_->tracer->Stop();
}

absl::Status TraceSession::Start() {
  absl::MutexLock lock(&impl_->mu);
  if (impl_->active) return absl::FailedPreconditionError("this TraceSession is already active");
  if (impl_->engine->abandoned()) {
    return absl::FailedPreconditionError("this TraceSession was abandoned");
  }
  if (CaptureEngine::Current() != nullptr && !CaptureEngine::Current()->abandoned()) {
    return absl::FailedPreconditionError(
        "another tracetorch TraceSession is active on this thread; stop it first");
  }
  if (!impl_->options.daemon_address.empty()) {
    // Streams this Start()..Stop() block to tracetorchd; never waits for the daemon.
    agent::DaemonSinkOptions sink_options;
    sink_options.client.address = impl_->options.daemon_address;
    sink_options.client.identity = protocol::IdentityFor(impl_->metadata);
    sink_options.flight_recorder = impl_->recorder;
    absl::StatusOr<std::shared_ptr<agent::DaemonSink>> sink =
        agent::DaemonSink::Create(std::move(sink_options));
    if (!sink.ok()) return sink.status();
    impl_->sink = *std::move(sink);
  }
  if (absl::Status s = impl_->tracer->Start(); !s.ok()) {
    impl_->sink.reset();
    return s;
  }
  if (impl_->sink != nullptr) impl_->tracer->SetEventSink(impl_->sink);
  if (impl_->options.ops == OpCapture::kOnNan) {
    impl_->engine->EnableOps(impl_->metadata.model_name, impl_->sink);
  }
  if (absl::Status s = impl_->engine->Install(); !s.ok()) {
    impl_->tracer->SetEventSink(nullptr);
    impl_->sink.reset();
    impl_->tracer->Stop();
    return s;
  }
  if (!impl_->options.watch_path.empty()) {
    std::weak_ptr<agent::Tracer> weak = impl_->tracer;
    absl::StatusOr<std::unique_ptr<agent::WatchFlusher>> flusher = agent::WatchFlusher::Start(
        impl_->options.watch_path, impl_->options.watch_interval, [weak]() -> TraceRecord {
          if (std::shared_ptr<agent::Tracer> t = weak.lock()) return t->WatchSnapshot();
          return TraceRecord{};
        });
    if (!flusher.ok()) {
      impl_->engine->Uninstall();
      impl_->tracer->SetEventSink(nullptr);
      impl_->sink.reset();
      impl_->tracer->Stop();
      return flusher.status();
    }
    impl_->flusher = *std::move(flusher);
  }
  impl_->final_record.reset();
  impl_->owner = std::this_thread::get_id();
  impl_->started = std::chrono::steady_clock::now();
  impl_->active = true;
  return absl::OkStatus();
}

absl::Status TraceSession::Stop() {
  std::unique_ptr<agent::WatchFlusher> flusher;
  std::shared_ptr<agent::DaemonSink> sink;
  std::chrono::steady_clock::time_point started;
  {
    absl::MutexLock lock(&impl_->mu);
    if (!impl_->active) return absl::OkStatus();
    if (impl_->owner != std::this_thread::get_id()) {
      return absl::FailedPreconditionError(
          "TraceSession::Stop() must be called on the thread that called Start()");
    }
    impl_->engine->Uninstall();
    flusher = std::move(impl_->flusher);
    sink = std::move(impl_->sink);
    started = impl_->started;
    impl_->active = false;
  }
  const double total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (flusher != nullptr) flusher->Stop();  // Outside the lock: a flush may be in progress.
  impl_->tracer->Stop();
  if (sink != nullptr) {
    impl_->tracer->SetEventSink(nullptr);
    // The embedded record is complete either way; a daemon that is away only loses the stream.
    if (absl::Status s = sink->Close(total_ms, static_cast<uint64_t>(impl_->tracer->hook_errors()),
                                     kDaemonCloseWait);
        !s.ok()) {
      guest::WarnOnce(
          "libtorch_daemon_close",
          absl::StrCat("tracetorch: the daemon stream did not complete: ", s.ToString()));
    }
  }
  absl::StatusOr<TraceRecord> record = impl_->tracer->Finalize(total_ms);
  if (!record.ok()) return record.status();
  impl_->Decorate(&*record);
  absl::Status written = absl::OkStatus();
  if (flusher != nullptr) written = WriteTraceFile(impl_->options.watch_path, *record);
  absl::MutexLock lock(&impl_->mu);
  impl_->final_record = *std::move(record);
  return written;
}

bool TraceSession::active() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->active;
}

TraceRecord TraceSession::record() const {
  absl::StatusOr<TraceRecord> r = impl_->Current();
  if (r.ok()) return *std::move(r);
  TraceRecord snapshot = impl_->tracer->Snapshot();
  impl_->Decorate(&snapshot);
  return snapshot;
}

std::vector<Anomaly> TraceSession::anomalies() const { return record().warnings; }

absl::Status TraceSession::Export(const std::string& path) const {
  absl::StatusOr<TraceRecord> r = impl_->Current();
  if (!r.ok()) return r.status();
  return WriteTraceFile(path, *r);
}

int64_t TraceSession::steps() const { return impl_->tracer->steps(); }

int64_t TraceSession::hook_errors() const { return impl_->tracer->hook_errors(); }

std::string TraceSession::op_graph_json() const {
  std::shared_ptr<const CaptureEngine::KeptOps> kept = impl_->engine->kept_ops();
  return kept != nullptr ? kept->json : std::string();
}

TraceSession::OpsStats TraceSession::ops_stats() const {
  const CaptureEngine::OpsCounts c = impl_->engine->ops_counts();
  return OpsStats{c.recorded_steps, c.skipped_steps};
}

std::string TraceSession::Summary() const {
  return agent::SessionSummary(record(), steps(), hook_errors());
}

// ---- ScopedTrace ----------------------------------------------------------------------------

ScopedTrace::ScopedTrace(TraceSession& session) : session_(session), status_(session.Start()) {}

ScopedTrace::~ScopedTrace() {
  if (status_.ok()) (void)session_.Stop();
}

// ---- ModuleScope ----------------------------------------------------------------------------

ModuleScope::ModuleScope(const torch::nn::Module& module) : ModuleScope(&module) {}

ModuleScope::ModuleScope(const torch::nn::Module* module) {
  CaptureEngine* engine = CaptureEngine::Current();
  if (engine == nullptr || module == nullptr) return;
  token_ = engine->PushScope(module, {});
  if (token_ >= 0) {
    engine_ = engine;
    epoch_ = engine->epoch();
  }
}

ModuleScope::ModuleScope(const torch::nn::Module& module, std::string_view block_name) {
  CaptureEngine* engine = CaptureEngine::Current();
  if (engine == nullptr) return;
  token_ = engine->PushScope(&module, block_name.empty() ? std::string_view("block") : block_name);
  if (token_ >= 0) {
    engine_ = engine;
    epoch_ = engine->epoch();
  }
}

ModuleScope::~ModuleScope() {
  if (engine_ == nullptr) return;
  CaptureEngine* engine = CaptureEngine::Current();
  if (engine == engine_ && engine->epoch() == epoch_) engine->PopScope(token_);
}

}  // namespace tracetorch
