// tracetorchd assembled: the session manager, the ingest listener, the gRPC TraceService and a
// housekeeping thread (periodic snapshots, event rate). main.cc parses flags into a DaemonConfig
// and runs one; tests run one in-process on temporary sockets.
//
// Thread-safe. Shutdown(): stop accepting, end connections, final snapshots, remove sockets.
#ifndef TRACETORCH_DAEMON_SERVER_DAEMON_H_
#define TRACETORCH_DAEMON_SERVER_DAEMON_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/core/counters.h"
#include "daemon/core/fleet_registry.h"
#include "daemon/core/flight_monitor.h"
#include "daemon/core/rate_limited_log.h"
#include "daemon/core/session_manager.h"
#include "daemon/core/write_health.h"
#include "daemon/ingest/ingest_server.h"
#include "tracetorch/v1/service.pb.h"

namespace grpc {
class Server;
}

namespace tracetorch::daemon {

class TraceServiceImpl;
class BearerTokenProcessor;
class WatchHub;
class BaselineStore;
class WorkerPool;
class DiffService;
class MetricsServer;
class TensorBoardExporter;

struct DaemonConfig {
  std::string socket_path;          // Ingest (agents).
  std::string service_socket_path;  // gRPC TraceService; empty: next to socket_path.
  std::string service_tcp_address;  // "127.0.0.1:7171": an extra TCP listener, only when set.
  // The TCP listener's access control (daemon/rpc/auth.h): a bearer token is required (refused
  // without); TLS with a certificate and key; client certificates checked against a CA; a
  // non-loopback address is refused without TLS. The Unix socket needs none of this.
  std::string service_token_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  std::string data_dir;
  // Where named baselines live: empty for DATA_DIR/baselines, or a postgresql:// URL
  // (daemon/store_pg) that several replicas may share.
  std::string store;
  // Serve only the TraceService (diffs and baselines, for CI): no ingest socket, no agents.
  bool service_only = false;
  absl::Duration snapshot_interval = absl::Seconds(5);
  uint32_t max_frame_bytes = 16u << 20;
  size_t max_connections = 512;
  size_t max_connections_per_uid = 0;       // 0: a quarter of max_connections.
  size_t ingest_memory_bytes = 256u << 20;  // Must hold one frame of max_frame_bytes.
  absl::Duration hello_timeout = absl::Seconds(10);
  absl::Duration idle_timeout = absl::Seconds(30);  // Agents heartbeat every second while idle.
  std::vector<uint32_t> allowed_uids;
  std::vector<uint32_t> allowed_gids;
  std::optional<gid_t> socket_group;  // Both sockets' group (mode 0660 either way).
  SessionManagerOptions sessions;     // data_dir is taken from above.
  // Prometheus /metrics (daemon/metrics): off when empty; "PORT" is 127.0.0.1:PORT, HOST:PORT
  // listens there (0: a free port, see metrics_port()). metrics_layers: per-layer series for
  // each live session's N slowest layers (0: none).
  std::string metrics_address;
  size_t metrics_layers = 0;
  // Each session's per-step history as TensorBoard event files under DIR/<session id>/, written
  // as it arrives (daemon/core/tensorboard_export.h); off when empty.
  std::string tensorboard_dir;
  // The flight monitor (daemon/core/flight_monitor.h): stalls, exits, forensic bundles
  // (data_dir is taken from above), and the thread stacks it takes of a stalled process.
  FlightMonitorOptions flight;
  ToolStackCapturerOptions stacks;
  // With a postgresql:// store: the address this daemon registers its sessions of jobs under in
  // the fleet registry (daemon/core/fleet_registry.h), for tools to reach it. Empty: HOST:PORT of
  // the TCP listener, else the service socket's path. fleet_interval: how often it publishes.
  std::string advertise;
  absl::Duration fleet_interval = absl::Seconds(1);
};

// Defaults: a system service (root, or `system` set) uses /run/tracetorch and /var/lib/tracetorch;
// a user uses $XDG_RUNTIME_DIR/tracetorch (else /tmp/tracetorch-$UID) and
// $XDG_STATE_HOME/tracetorch (else ~/.local/state/tracetorch).
std::string DefaultSocketPath(bool system);
std::string DefaultDataDir(bool system);

// The TCP listener's settings that need no file (daemon/rpc/auth.h ValidateTcpListenerOptions): OK
// without a TCP listener; InvalidArgument for a TCP listener without a token file, or on a
// non-loopback address without TLS, ... Start() checks this first; main.cc exits 2 on it.
absl::Status ValidateRemoteAccess(const DaemonConfig& config);

class Daemon {
 public:
  // Validates the config (InvalidArgument), loads the index, opens the baseline store (a
  // PostgreSQL store that cannot be reached: Unavailable), claims both sockets
  // (FailedPrecondition when another daemon serves them), starts gRPC and ingest (not with
  // service_only). Each socket gets
  // mode 0660 and socket_group: PermissionDenied or Internal, naming the socket, when that cannot
  // be set (daemon/ingest/ingest_server.h SetSocketAccess); Unavailable when gRPC cannot listen.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(DaemonConfig config);
  ~Daemon();  // Shutdown().

  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  v1::DaemonStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);
  SessionManager& sessions() { return *manager_; }
  // Null with service_only.
  FlightMonitor* flight_monitor() { return flight_.get(); }
  const DaemonConfig& config() const { return config_; }
  // The TCP listener's port (the one picked for port 0); 0 without a TCP listener.
  int tcp_port() const { return tcp_port_; }
  // The /metrics port (the one picked for port 0); 0 without metrics_address.
  int metrics_port() const { return metrics_port_; }

 private:
  explicit Daemon(DaemonConfig config);
  void Housekeeping();
  void PublishFleet();

  const DaemonConfig config_;
  const absl::Time started_;
  DaemonCounters counters_;
  RateLimitedLog log_;
  std::unique_ptr<SessionManager> manager_;
  WriteHealth baseline_health_{"baseline", &counters_.baseline_errors};  // For baselines_.
  std::unique_ptr<BaselineStore> baselines_;  // DATA_DIR/baselines (named baselines for diffs).
  std::unique_ptr<DiffService> diff_;         // Diffs and baselines for the service.
  std::unique_ptr<WatchHub> watch_hub_;       // Live viewers; outlives the gRPC server's reactors.
  std::unique_ptr<WorkerPool> store_pool_;    // The service's Diff and baseline calls.
  std::unique_ptr<TraceServiceImpl> service_;
  std::unique_ptr<TensorBoardExporter> tensorboard_;  // Null without tensorboard_dir.
  std::shared_ptr<BearerTokenProcessor> tcp_auth_;    // Null without a TCP listener.
  int tcp_port_ = 0;                                  // Constant after Start().
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<IngestMemoryBudget> ingest_budget_;  // Set before any service starts.
  std::unique_ptr<FleetRegistry> fleet_;               // With a postgresql:// store.
  std::unique_ptr<FleetPublisher> fleet_publisher_;    // ...and agents (not service-only).
  std::thread fleet_thread_;
  std::unique_ptr<ToolStackCapturer> stacks_;
  std::unique_ptr<FlightMonitor> flight_;  // Outlives ingest_ (connections hand it sessions).
  std::unique_ptr<IngestServer> ingest_;
  std::thread housekeeping_;
  absl::Notification stop_;
  // /metrics; stopped first in Shutdown(), as its scrapes read everything above.
  std::unique_ptr<MetricsServer> metrics_;
  int metrics_port_ = 0;  // Constant after Start().

  mutable absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Event-rate window: (time, events_total) at the start of the current window and the rate
  // measured over the previous one.
  absl::Time rate_time_ ABSL_GUARDED_BY(mu_);
  uint64_t rate_events_ ABSL_GUARDED_BY(mu_) = 0;
  double events_per_second_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_SERVER_DAEMON_H_
