#include "daemon/server/daemon.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/diff_service.h"
#include "daemon/core/file_baseline_store.h"
#include "daemon/core/tensorboard_export.h"
#include "daemon/core/watch_hub.h"
#include "daemon/core/worker_pool.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/metrics_server.h"
#include "daemon/rpc/auth.h"
#include "daemon/rpc/service.h"
#include "daemon/store_pg/pg_baseline_store.h"
#include "daemon/store_pg/pg_fleet_registry.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/server_posix.h"
#include "protocol/address.h"
#include "spdlog/spdlog.h"

namespace tracetorch::daemon {
namespace {

std::string EnvOr(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : std::move(fallback);
}

uint64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

std::string DefaultSocketPath(bool system) {
  if (system || geteuid() == 0) return "/run/tracetorch/tracetorchd.sock";
  const std::string runtime = EnvOr("XDG_RUNTIME_DIR", absl::StrCat("/tmp/tracetorch-", getuid()));
  return absl::StrCat(runtime, "/tracetorch/tracetorchd.sock");
}

std::string DefaultDataDir(bool system) {
  if (system || geteuid() == 0) return "/var/lib/tracetorch";
  const std::string state =
      EnvOr("XDG_STATE_HOME", absl::StrCat(EnvOr("HOME", "/tmp"), "/.local/state"));
  return absl::StrCat(state, "/tracetorch");
}

namespace {

TcpListenerOptions TcpOptionsOf(const DaemonConfig& c) {
  TcpListenerOptions o;
  o.address = c.service_tcp_address;
  o.token_file = c.service_token_file;
  o.tls_cert_file = c.tls_cert_file;
  o.tls_key_file = c.tls_key_file;
  o.tls_client_ca_file = c.tls_client_ca_file;
  return o;
}

}  // namespace

absl::Status ValidateRemoteAccess(const DaemonConfig& config) {
  if (config.service_tcp_address.empty()) {
    if (!config.service_token_file.empty() || !config.tls_cert_file.empty() ||
        !config.tls_key_file.empty() || !config.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "a token file or TLS files are given but no TCP listener (--service-tcp)");
    }
    return absl::OkStatus();
  }
  return ValidateTcpListenerOptions(TcpOptionsOf(config));
}

Daemon::Daemon(DaemonConfig config) : config_(std::move(config)), started_(absl::Now()) {}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonConfig config) {
  if (config.socket_path.empty()) return absl::InvalidArgumentError("no socket path");
  if (config.service_socket_path.empty()) {
    config.service_socket_path = protocol::ServiceSocketBeside(config.socket_path);
  }
  if (config.service_socket_path == config.socket_path) {
    return absl::InvalidArgumentError("the service socket must differ from the ingest socket");
  }
  if (config.snapshot_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the snapshot interval must be positive");
  }
  if (config.max_frame_bytes < 1024) {
    return absl::InvalidArgumentError("the frame limit must be at least 1024 bytes");
  }
  if (config.ingest_memory_bytes < static_cast<size_t>(config.max_frame_bytes) + 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ingest memory budget (", config.ingest_memory_bytes,
        " bytes) must hold one frame of the frame limit (", config.max_frame_bytes, " bytes)"));
  }
  if (config.hello_timeout <= absl::ZeroDuration() || config.idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the hello and idle timeouts must be positive");
  }
  if (absl::Status s = ValidateRemoteAccess(config); !s.ok()) return s;
  config.sessions.data_dir = config.data_dir;
  std::unique_ptr<Daemon> d(new Daemon(std::move(config)));
  const DaemonConfig& c = d->config_;

  absl::StatusOr<std::unique_ptr<SessionManager>> manager =
      SessionManager::Create(c.sessions, &d->counters_);
  if (!manager.ok()) return manager.status();
  d->manager_ = *std::move(manager);
  if (!c.service_only) {
    FlightMonitorOptions flight = c.flight;
    flight.data_dir = c.data_dir;
    d->stacks_ = std::make_unique<ToolStackCapturer>(c.stacks);
    d->flight_ = std::make_unique<FlightMonitor>(std::move(flight), d->stacks_.get());
  }
  if (c.store.empty()) {
    d->baselines_ =
        std::make_unique<FileBaselineStore>(c.data_dir, absl::Now, &d->baseline_health_);
  } else if (IsPostgresUrl(c.store)) {
    absl::StatusOr<std::unique_ptr<PgBaselineStore>> pg = PgBaselineStore::Open(c.store);
    if (!pg.ok()) return pg.status();
    d->baselines_ = *std::move(pg);
    absl::StatusOr<std::unique_ptr<PgFleetRegistry>> fleet = PgFleetRegistry::Open(c.store);
    if (!fleet.ok()) return fleet.status();
    d->fleet_ = *std::move(fleet);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown baseline store '", c.store, "' (postgresql://... or none for the data dir)"));
  }

  // Claim the ingest path first: it is how a second instance is detected (gRPC would silently
  // unlink and steal its socket).
  IngestServerOptions ingest;
  ingest.socket_path = c.socket_path;
  ingest.max_frame_bytes = c.max_frame_bytes;
  ingest.max_connections = c.max_connections;
  ingest.max_connections_per_uid = c.max_connections_per_uid;
  ingest.ingest_memory_bytes = c.ingest_memory_bytes;
  ingest.hello_timeout = c.hello_timeout;
  ingest.idle_timeout = c.idle_timeout;
  d->ingest_budget_ = std::make_unique<IngestMemoryBudget>(c.ingest_memory_bytes);
  ingest.allowed_uids = c.allowed_uids;
  ingest.allowed_gids = c.allowed_gids;
  ingest.socket_group = c.socket_group;
  ingest.flight_monitor = d->flight_.get();
  if (!c.service_only) {
    if (absl::Status s = ClaimSocketPath(c.socket_path); !s.ok()) return s;
  }
  if (absl::Status s = ClaimSocketPath(c.service_socket_path); !s.ok()) return s;

  Daemon* self = d.get();
  ServiceDeps deps;
  deps.manager = d->manager_.get();
  d->watch_hub_ = std::make_unique<WatchHub>(d->manager_.get());
  if (!c.tensorboard_dir.empty()) {
    d->tensorboard_ = std::make_unique<TensorBoardExporter>(c.tensorboard_dir);
  }
  deps.watch_hub = d->watch_hub_.get();
  d->diff_ = std::make_unique<DiffService>(d->manager_.get(), d->baselines_.get());
  deps.diff = d->diff_.get();
  // Diffs and baseline calls, off gRPC's threads: a few at once (each may hold a store
  // connection), a bounded queue behind them (more is answered "busy" at once).
  d->store_pool_ = std::make_unique<WorkerPool>(WorkerPoolOptions{.threads = 4, .max_queued = 64});
  deps.store_pool = d->store_pool_.get();
  deps.stats = [self] { return self->Stats(); };
  deps.flight = d->flight_.get();
  deps.fleet = d->fleet_.get();
  d->service_ = std::make_unique<TraceServiceImpl>(std::move(deps));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", c.service_socket_path),
                           grpc::InsecureServerCredentials());
  std::string tcp_security;  // For the log: " (TLS, token)".
  std::string tcp_listen;
  if (!c.service_tcp_address.empty()) {
    absl::StatusOr<TcpListener> tcp = MakeTcpListener(TcpOptionsOf(c));
    if (!tcp.ok()) return tcp.status();
    for (const std::string& w : tcp->warnings) spdlog::warn("{}", w);
    tcp_security =
        absl::StrCat(tcp->tls ? " (TLS" : " (loopback, no TLS",
                     tcp->client_certificates ? ", client certificates" : "", ", token)");
    tcp_listen = tcp->address;
    d->tcp_auth_ = tcp->processor;
    builder.AddListeningPort(tcp_listen, tcp->credentials, &d->tcp_port_);
  }
  // Diff and SetBaseline may upload whole traces (gRPC's default limit is 4 MiB).
  builder.SetMaxReceiveMessageSize(256 << 20);
  builder.RegisterService(d->service_.get());
  d->grpc_server_ = builder.BuildAndStart();
  if (d->grpc_server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot start the gRPC service on ", c.service_socket_path,
        c.service_tcp_address.empty() ? "" : " / ", c.service_tcp_address,
        c.tls_cert_file.empty() ? ""
                                : " (is the address free? do the TLS certificate and key match?)"));
  }
  if (!c.service_tcp_address.empty() && d->tcp_port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", tcp_listen,
        c.tls_cert_file.empty() ? "" : " (or the TLS certificate and key do not match)"));
  }
  // gRPC created the socket with the process umask and listens already: its mode is fixed right
  // after, and a failure stops the start (the returned error unwinds through ~Daemon).
  if (absl::Status s = SetSocketAccess(c.service_socket_path, c.socket_group); !s.ok()) return s;

  if (!c.service_only) {
    d->flight_->Start();
    // A tool given the agents' socket is served there too: one address names the daemon, whatever
    // the socket is called. The gRPC server outlives the ingest server (Shutdown's order).
    ingest.serve_viewer = [server = d->grpc_server_.get()](int fd) {
      grpc::AddInsecureChannelFromFd(server, fd);
    };
    absl::StatusOr<std::unique_ptr<IngestServer>> server = IngestServer::Start(
        std::move(ingest), d->manager_.get(), &d->counters_, &d->log_, d->ingest_budget_.get());
    if (!server.ok()) return server.status();
    d->ingest_ = *std::move(server);
  }
  {
    absl::MutexLock lock(&d->mu_);
    d->rate_time_ = absl::Now();
  }
  d->housekeeping_ = std::thread([self] { self->Housekeeping(); });
  if (d->fleet_ != nullptr && !c.service_only) {
    std::string advertise = c.advertise;
    if (advertise.empty() && d->tcp_port_ != 0) {
      char host[256] = {};
      gethostname(host, sizeof(host) - 1);
      advertise = absl::StrCat(host, ":", d->tcp_port_);
    }
    if (advertise.empty()) advertise = c.service_socket_path;
    d->fleet_publisher_ =
        std::make_unique<FleetPublisher>(d->fleet_.get(), d->manager_.get(), advertise);
    d->fleet_thread_ = std::thread([self] { self->PublishFleet(); });
  }
  if (!c.metrics_address.empty()) {
    auto collector = std::make_shared<DaemonMetrics>(
        [self] { return self->Stats(); }, d->manager_.get(), MetricsOptions{c.metrics_layers});
    absl::StatusOr<std::unique_ptr<MetricsServer>> metrics =
        MetricsServer::Start(c.metrics_address, std::move(collector));
    if (!metrics.ok()) return metrics.status();
    d->metrics_ = *std::move(metrics);
    d->metrics_port_ = d->metrics_->port();
    spdlog::info("tracetorchd serving Prometheus metrics on http://{}/metrics",
                 d->metrics_->address());
  }
  spdlog::info("tracetorchd serving {}{}, TraceService on {}{}; data in {}; baselines in {}",
               c.service_only ? "no agents (--service-only)" : "agents on ",
               c.service_only ? "" : c.socket_path, c.service_socket_path,
               tcp_listen.empty()
                   ? ""
                   : absl::StrCat(" and ", tcp_listen.substr(0, tcp_listen.rfind(':')), ":",
                                  d->tcp_port_, tcp_security),
               c.data_dir.empty() ? "(memory only)" : c.data_dir, d->baselines_->Describe());
  return d;
}

Daemon::~Daemon() { Shutdown(); }

void Daemon::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  metrics_.reset();  // Waits for a scrape in progress.
  stop_.Notify();
  if (housekeeping_.joinable()) housekeeping_.join();
  if (fleet_thread_.joinable()) fleet_thread_.join();
  // Viewers first: each gets `shutdown` and its stream ends, so that the gRPC server's shutdown
  // below does not wait for their reactors (and ingest's end does not look like sessions ending).
  if (watch_hub_ != nullptr) watch_hub_->Shutdown();
  // Before ingest: the daemon stopping ends connections, which is not the processes' end.
  if (flight_ != nullptr) flight_->Stop();
  if (ingest_ != nullptr) ingest_->Shutdown();
  if (grpc_server_ != nullptr) {
    // First the store pool: the calls still waiting for it are answered UNAVAILABLE (as are new
    // ones), the running ones finish; gRPC's Shutdown waits for every call to be answered.
    if (store_pool_ != nullptr) store_pool_->Stop();
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    grpc_server_->Wait();
    unlink(config_.service_socket_path.c_str());
  }
  if (manager_ != nullptr) manager_->Shutdown();
  if (tensorboard_ != nullptr) {  // Sessions are ended now: the rest of each run, once.
    tensorboard_->Export(*manager_);
    const TensorBoardExportStats tb = tensorboard_->stats();
    spdlog::info(
        "tensorboard export: {} runs, {} scalars, {} steps thinned before written, {} "
        "runs given up on errors",
        tb.runs, tb.scalars, tb.skipped_steps, tb.errors);
  }
  spdlog::info("tracetorchd stopped");
}

void Daemon::Housekeeping() {
  absl::Time next_snapshot = absl::Now() + config_.snapshot_interval;
  while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(250))) {
    const absl::Time now = absl::Now();
    {
      absl::MutexLock lock(&mu_);
      if (now - rate_time_ >= absl::Seconds(1)) {
        const uint64_t events = counters_.events_total.load(std::memory_order_relaxed);
        events_per_second_ =
            static_cast<double>(events - rate_events_) / absl::ToDoubleSeconds(now - rate_time_);
        rate_events_ = events;
        rate_time_ = now;
      }
    }
    if (now >= next_snapshot) {
      manager_->WriteDueSnapshots();
      if (tensorboard_ != nullptr) tensorboard_->Export(*manager_);
      next_snapshot = now + config_.snapshot_interval;
    } else if (manager_->RetryDue()) {
      manager_->WriteDueSnapshots();  // Failed writes, once their back-off has passed.
    }
    manager_->FlushIndexIfDue();  // Sessions that ended since the last index write.
  }
}

void Daemon::PublishFleet() {
  // Its own thread: the store may block (a server away costs its connect timeout).
  while (!stop_.WaitForNotificationWithTimeout(config_.fleet_interval)) {
    if (absl::Status s = fleet_publisher_->PublishChanges(absl::Now()); !s.ok()) {
      log_.Warn("fleet", absl::StrCat("cannot publish sessions to the fleet store: ", s.message()));
    }
  }
}

v1::DaemonStats Daemon::Stats() const {
  v1::DaemonStats s;
  const SessionManager::Totals t = manager_->totals();
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  s.set_connections(load(counters_.connections_open));
  s.set_live_sessions(t.live);
  s.set_events_total(load(counters_.events_total));
  {
    absl::MutexLock lock(&mu_);
    s.set_events_per_second(events_per_second_);
  }
  s.set_dropped_events(t.dropped_events);
  s.set_rejected_frames(load(counters_.rejected_frames));
  const WatchHubStats watch = watch_hub_ != nullptr ? watch_hub_->stats() : WatchHubStats{};
  s.set_watchers(watch.watchers);
  s.set_watch_updates_sent(watch.updates_sent);
  s.set_watch_updates_coalesced(watch.updates_coalesced);
  s.set_sessions_total(t.known);
  s.set_sessions_in_memory(t.in_memory);
  s.set_sessions_evicted(load(counters_.sessions_evicted));
  s.set_rejected_events(load(counters_.rejected_events));
  s.set_rejected_connections(load(counters_.rejected_connections));
  s.set_limit_hits(load(counters_.limit_hits));
  s.set_snapshots_written(load(counters_.snapshots_written));
  s.set_snapshot_errors(load(counters_.snapshot_errors));
  s.set_bytes_received(load(counters_.bytes_received));
  s.set_cpu_seconds(CpuSeconds());
  s.set_rss_bytes(RssBytes());
  s.set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
  s.set_unauthenticated_calls(tcp_auth_ != nullptr ? tcp_auth_->rejected() : 0);
  if (ingest_budget_ != nullptr) {
    const IngestBudgetStats b = ingest_budget_->stats();
    s.set_ingest_memory_bytes(b.reserved_bytes);
    s.set_ingest_memory_limit_bytes(b.limit_bytes);
    s.set_ingest_memory_peak_bytes(b.peak_reserved_bytes);
    s.set_ingest_memory_waits(b.waits);
  }
  s.set_connections_timed_out(load(counters_.connections_timed_out));
  s.set_index_errors(load(counters_.index_errors));
  s.set_baseline_errors(load(counters_.baseline_errors));
  s.set_sessions_not_durable(t.not_durable);
  s.set_connections_evicted(load(counters_.connections_evicted));
  s.set_flight_recorders_refused(load(counters_.flight_recorders_refused));
  if (flight_ != nullptr) {
    const FlightMonitorStats f = flight_->stats();
    s.set_stalled_sessions(f.stalled);
    s.set_stalls_total(f.stalls_total);
    s.set_flight_recorders(f.recorders);
    s.set_forensic_bundles_total(f.bundles_total);
    s.set_forensic_bundle_errors(f.bundle_errors);
  }
  return s;
}

}  // namespace tracetorch::daemon
