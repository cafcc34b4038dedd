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
#include "agent/libtorch/capture_engine.h"
#include "agent/libtorch/module_tree.h"
#include "agent/session.h"
#include "agent/summary.h"
#include "agent/watch_flusher.h"
#include "protocol/address.h"
#include "trace/json.h"

namespace tracetorch {

using libtorch_internal::CaptureEngine;
using libtorch_internal::ModuleTree;

// The libtorch door over agent::Session (agent/session.h), which owns the tracer, the flight
// recorder, the daemon stream, the watch flusher and the op watch, and the order they start and
// stop in. This door adds what is libtorch's: the module tree, the operator callbacks
// (CaptureEngine), the owner thread, and a session destroyed on another thread (abandoned).
struct TraceSession::Impl {
  // Constant after Create(). The engine shares the session: an abandoned engine outlives this.
  std::shared_ptr<agent::Session> session;
  std::shared_ptr<CaptureEngine> engine;
  TraceSessionOptions options;
  TraceMetadata metadata;

  // Touched by Start()/Stop() (the owner thread) and read by the accessors.
  mutable absl::Mutex mu;
  bool active ABSL_GUARDED_BY(mu) = false;
  std::thread::id owner ABSL_GUARDED_BY(mu);
  std::chrono::steady_clock::time_point started ABSL_GUARDED_BY(mu);

  // The engine over `tree` (either kind of module): metadata, session, declared layers. Throws
  // what libtorch throws; Create() catches it.
  static absl::StatusOr<std::unique_ptr<Impl>> Make(ModuleTree tree,
                                                    std::optional<c10::Device> device,
                                                    CaptureEngine::Mode mode,
                                                    const void* script_self,
                                                    const TraceSessionOptions& options);

  // ops = kOnNan: the op watch's options, with the module's parameters and buffers (read again at
  // each Start()).
  agent::OpsOptions OpsFor() const {
    agent::OpsOptions ops;
    ops.model_name = metadata.model_name;
    ops.root_type = engine->tree().root_type();
    ops.source = "cpp";
    engine->tree().ForEachTensor([&](std::string name, const at::Tensor& t, bool buffer) {
      ops.parameters.push_back(agent::OpsOptions::Parameter{std::move(name), t, buffer});
    });
    return ops;
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

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

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
  agent::SessionOptions session_options;
  session_options.tracer = std::move(tracer_options);
  session_options.metadata = metadata;
  absl::StatusOr<std::unique_ptr<agent::Session>> session =
      agent::Session::Create(std::move(session_options));
  if (!session.ok()) return session.status();
  if (absl::Status s = tree.DeclareLayers((*session)->tracer()); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->session = *std::move(session);
  impl->metadata = std::move(metadata);
  impl->engine = std::make_shared<CaptureEngine>(impl->session, std::move(tree), mode, script_self);
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
  // Only the starting thread can remove its callbacks: make them inert instead, and end the
  // block without touching what that thread owns (the op watch).
  impl_->engine->Abandon();
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->active = false;
  }
  impl_->session->Abandon();
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
  agent::Session& session = *impl_->session;
  if (!impl_->options.daemon_address.empty()) {
    // Streams this Start()..Stop() block to tracetorchd; never waits for the daemon.
    if (absl::Status s = session.ConnectDaemon(impl_->options.daemon_address, impl_->metadata);
        !s.ok()) {
      return s;
    }
  }
  std::optional<agent::OpsOptions> ops;
  if (impl_->options.ops == OpCapture::kOnNan) ops = impl_->OpsFor();
  absl::Status s = session.SetOps(std::move(ops));
  if (s.ok()) {
    s = session.Start();
    if (!s.ok()) (void)session.CloseStream(absl::ZeroDuration(), std::nullopt);
  }
  if (s.ok()) {
    s = impl_->engine->Install();
    if (s.ok() && !impl_->options.watch_path.empty()) {
      s = session.StartWatch(impl_->options.watch_path, impl_->options.watch_interval);
      if (!s.ok()) impl_->engine->Uninstall();
    }
    if (!s.ok()) session.Abandon();  // Stops the Tracer, closes the stream it connected.
  }
  if (!s.ok()) return s;
  impl_->owner = std::this_thread::get_id();
  impl_->started = std::chrono::steady_clock::now();
  impl_->active = true;
  return absl::OkStatus();
}

absl::Status TraceSession::Stop() {
  std::chrono::steady_clock::time_point started;
  {
    absl::MutexLock lock(&impl_->mu);
    if (!impl_->active) return absl::OkStatus();
    if (impl_->owner != std::this_thread::get_id()) {
      return absl::FailedPreconditionError(
          "TraceSession::Stop() must be called on the thread that called Start()");
    }
    impl_->engine->Uninstall();
    started = impl_->started;
    impl_->active = false;
  }
  return impl_->session->Finish(MillisecondsSince(started));
}

bool TraceSession::active() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->active;
}

TraceRecord TraceSession::record() const {
  absl::StatusOr<TraceRecord> r = impl_->session->Current();
  if (r.ok()) return *std::move(r);
  return impl_->session->Snapshot();
}

std::vector<Anomaly> TraceSession::anomalies() const { return record().warnings; }

absl::Status TraceSession::Export(const std::string& path) const {
  absl::StatusOr<TraceRecord> r = impl_->session->Current();
  if (!r.ok()) return r.status();
  return WriteTraceFile(path, *r);
}

int64_t TraceSession::steps() const { return impl_->session->tracer().steps(); }

int64_t TraceSession::hook_errors() const { return impl_->session->tracer().hook_errors(); }

std::string TraceSession::op_graph_json() const {
  std::shared_ptr<const agent::KeptOps> kept = impl_->session->kept_ops();
  return kept != nullptr ? kept->json : std::string();
}

TraceSession::OpsStats TraceSession::ops_stats() const {
  const agent::OpsStats stats = impl_->session->ops_stats().value_or(agent::OpsStats{});
  return OpsStats{stats.recorded_steps, stats.skipped_steps};
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
