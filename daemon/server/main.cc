// tracetorchd: collects traces from tracetorch agents over a Unix socket and serves them to
// viewers and tools over gRPC. See daemon.h and deploy/.
#include <grp.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/metrics/metrics_server.h"
#include "daemon/server/daemon.h"
#include "daemon/store_pg/pg_baseline_store.h"
#include "spdlog/spdlog.h"

namespace {

// A finite number above `floor` (or at it, when `inclusive`); the message names what was given,
// where CLI11's own range checks print the whole span of a double.
CLI::Validator NumberAbove(double floor, bool inclusive) {
  const std::string what = absl::StrCat("a number ", inclusive ? ">= " : "> ", floor);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        if (absl::SimpleAtod(text, &v) && std::isfinite(v) && (inclusive ? v >= floor : v > floor))
          return "";
        return absl::StrCat("must be ", what, ", got '", text, "'");
      },
      what);
}

const CLI::Validator kPositive = NumberAbove(0, false);
const CLI::Validator kNonNegative = NumberAbove(0, true);

}  // namespace

int main(int argc, char** argv) {
  using tracetorch::daemon::Daemon;
  using tracetorch::daemon::DaemonConfig;

  CLI::App app{"tracetorchd: the tracetorch collection daemon"};
  app.set_config("--config", "", "Read options from this TOML/INI file (key = value)");
  DaemonConfig config;
  bool system = false;
  double snapshot_s = 5;
  std::string group;
  std::string log_level = "info";
  app.add_flag("--system", system,
               "Use the system service's defaults (/run/tracetorch, /var/lib/tracetorch)");
  app.add_option("--socket", config.socket_path, "Ingest socket for agents")
      ->envname("TRACETORCH_DAEMON");
  app.add_option("--service-socket", config.service_socket_path,
                 "gRPC TraceService socket (default: tracetorchd-rpc.sock beside --socket)");
  app.add_option("--service-tcp", config.service_tcp_address,
                 "Also serve TraceService on TCP: PORT (127.0.0.1:PORT) or HOST:PORT (off unless "
                 "set; needs --token-file; a non-loopback HOST needs --tls-cert/--tls-key)");
  app.add_option("--token-file", config.service_token_file,
                 "Bearer token every TCP call must carry (first line of the file; mode 0600)");
  app.add_option("--tls-cert", config.tls_cert_file, "TLS server certificate chain (PEM) for TCP");
  app.add_option("--tls-key", config.tls_key_file, "TLS server private key (PEM) for TCP");
  app.add_option("--tls-client-ca", config.tls_client_ca_file,
                 "Require TCP clients to present a certificate signed by this CA (PEM)");
  app.add_option("--data-dir", config.data_dir, "Where snapshots and the session index live");
  app.add_option("--store", config.store,
                 "Where named baselines live: postgresql://USER@HOST/DB?... (libpq URL; schema "
                 "created and migrated by the daemon; replicas may share it). Default: "
                 "DATA_DIR/baselines");
  app.add_flag("--service-only", config.service_only,
               "Serve only the TraceService (diffs and baselines for CI): no ingest socket. "
               "With --store and no --data-dir, keeps no data directory");
  app.add_option("--snapshot-interval", snapshot_s, "Seconds between snapshots of live sessions")
      ->check(kPositive);
  app.add_option("--max-frame-bytes", config.max_frame_bytes, "Largest ingest frame accepted")
      ->check(CLI::Range(1024u, 1u << 30));
  app.add_option("--max-connections", config.max_connections, "Agent connections at once")
      ->check(kPositive);
  app.add_option("--max-connections-per-uid", config.max_connections_per_uid,
                 "Agent connections at once from one uid (default: a quarter of "
                 "--max-connections)")
      ->check(kNonNegative);
  size_t ingest_memory_mb = config.ingest_memory_bytes >> 20;
  app.add_option("--ingest-memory-mb", ingest_memory_mb,
                 "MiB of read buffers all connections' large frames may hold at once; a frame "
                 "that does not fit waits (backpressure). Must hold one --max-frame-bytes frame")
      ->check(CLI::Range(1, 1 << 20));
  double hello_timeout_s = absl::ToDoubleSeconds(config.hello_timeout);
  app.add_option("--hello-timeout", hello_timeout_s,
                 "Seconds a new connection has to complete its Hello")
      ->check(kPositive);
  double idle_timeout_s = absl::ToDoubleSeconds(config.idle_timeout);
  app.add_option("--idle-timeout", idle_timeout_s,
                 "Seconds a connection may go without completing a frame (agents heartbeat "
                 "every second)")
      ->check(kPositive);
  app.add_option("--max-live-sessions", config.sessions.max_live_sessions, "Live sessions at once")
      ->check(kPositive);
  app.add_option("--max-sessions-per-uid", config.sessions.max_live_sessions_per_uid,
                 "Live sessions one peer uid may hold at once (0: no limit but "
                 "--max-live-sessions)")
      ->check(kNonNegative);
  app.add_option("--max-sessions-in-memory", config.sessions.max_sessions_in_memory,
                 "Sessions kept in memory; ended ones beyond this are evicted to disk")
      ->check(kNonNegative);
  app.add_option("--max-index-entries", config.sessions.max_index_entries,
                 "Sessions listed in the index; the oldest ended ones are forgotten")
      ->check(kPositive);
  app.add_option("--retain-sessions", config.sessions.retain_sessions,
                 "Ended sessions kept (index entry and snapshot); older ones are deleted. 0: no "
                 "limit but --max-index-entries")
      ->check(kNonNegative);
  double retain_days = 0;
  app.add_option("--retain-days", retain_days,
                 "Delete ended sessions (index entry and snapshot) this many days after they "
                 "ended. 0: keep them")
      ->check(kNonNegative);
  double index_interval_s = absl::ToDoubleSeconds(config.sessions.index_interval);
  app.add_option("--index-interval", index_interval_s,
                 "Seconds between rewrites of the session index at most")
      ->check(kPositive);
  app.add_option("--max-layers", config.sessions.session_limits.max_layers,
                 "Declared layers per session")
      ->check(kPositive);
  app.add_option("--history-steps", config.sessions.session_limits.history_steps,
                 "Per-layer history points kept for live views")
      ->check(CLI::Range(4, 1 << 20));
  app.add_option("--allow-uid", config.allowed_uids,
                 "Only these uids (and --allow-gid) may stream");
  app.add_option("--allow-gid", config.allowed_gids,
                 "Only these gids (and --allow-uid) may stream");
  app.add_option("--socket-group", group, "Group owning the sockets (mode 0660)");
  app.add_option("--metrics-listen", config.metrics_address,
                 "Serve Prometheus metrics on http://ADDR/metrics: PORT (127.0.0.1:PORT) or "
                 "HOST:PORT (off unless set; e.g. 9464)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            absl::StatusOr<std::string> a = tracetorch::daemon::MetricsListenAddress(text);
            return a.ok() ? "" : std::string(a.status().message());
          },
          "ADDR"));
  app.add_option("--metrics-layers", config.metrics_layers,
                 "Per-layer series for each live session's N slowest layers (0: none; adds 2N "
                 "series per live session)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--tensorboard-dir", config.tensorboard_dir,
                 "Write each session's per-step history as TensorBoard event files under "
                 "DIR/<session id>/ as it arrives (every --snapshot-interval)");
  double stall_floor_s = absl::ToDoubleSeconds(config.flight.stall_rule.floor);
  app.add_option("--stall-floor", stall_floor_s,
                 "A live session whose flight recorder position has not moved for max(FACTOR x "
                 "its median step time, this many seconds) is stalled")
      ->check(CLI::PositiveNumber);
  app.add_option("--stall-factor", config.flight.stall_rule.factor,
                 "FACTOR above (times the median step time)")
      ->check(CLI::PositiveNumber);
  double stall_poll_s = absl::ToDoubleSeconds(config.flight.poll_interval);
  app.add_option("--stall-poll", stall_poll_s,
                 "Seconds between reads of the flight recorders (the stall detection's lag)")
      ->check(CLI::Range(0.01, 60.0));
  std::string stacks = "same-user";
  app.add_option("--stacks", stacks,
                 "Thread stacks of a stalled process (eu-stack, and py-spy where installed): "
                 "off, same-user (default: only processes of the daemon's uid) or any-user "
                 "(needs CAP_SYS_PTRACE)")
      ->check(CLI::IsMember({"off", "same-user", "any-user"}));
  app.add_option("--eu-stack", config.stacks.eu_stack, "The eu-stack program (elfutils)");
  app.add_option("--advertise", config.advertise,
                 "With --store postgresql://: the address tools reach this daemon at, as it "
                 "registers its sessions of jobs in the fleet store (default: HOST:PORT of "
                 "--service-tcp, else the service socket)");
  app.add_option("--py-spy", config.stacks.py_spy, "The py-spy program (Python frames)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    // One line and exit 2, as for every other configuration the daemon refuses.
    std::cerr << "tracetorchd: " << e.what() << " (see 'tracetorchd --help')\n";
    return 2;
  }

  // Debian's absl is built with its debug-mode deadlock detection on: every Mutex::Lock then
  // takes one global spinlock and walks a lock graph, which cost the ingest path about half its
  // time. The tests (and the clang job) keep it; the daemon's own process turns it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // glibc raises its mmap threshold each time a large block is freed, up to 32 MiB, after which
  // a finished 16 MiB frame's buffer stays in the heap, resident, when its connection is gone.
  // A fixed threshold keeps every large buffer (FrameBuffer growth, big messages) in its own
  // mapping, returned to the system when freed.
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  mallopt(M_TRIM_THRESHOLD, 1 << 20);

  spdlog::set_level(spdlog::level::from_str(log_level));
  if (config.socket_path.empty())
    config.socket_path = tracetorch::daemon::DefaultSocketPath(system);
  // A service-only replica over a shared store needs no directory of its own (and two replicas on
  // one machine would otherwise contend for the default one's lock).
  if (config.data_dir.empty() && !(config.service_only && !config.store.empty())) {
    config.data_dir = tracetorch::daemon::DefaultDataDir(system);
  }
  config.snapshot_interval = absl::Seconds(snapshot_s);
  config.ingest_memory_bytes = ingest_memory_mb << 20;
  config.sessions.retain_for = absl::Hours(24 * retain_days);
  config.sessions.index_interval = absl::Seconds(index_interval_s);
  config.hello_timeout = absl::Seconds(hello_timeout_s);
  config.idle_timeout = absl::Seconds(idle_timeout_s);
  config.flight.stall_rule.floor = absl::Seconds(stall_floor_s);
  config.flight.poll_interval = absl::Seconds(stall_poll_s);
  config.stacks.policy = *tracetorch::daemon::ParseStackPolicy(stacks);  // Checked above.
  if (!group.empty()) {
    const struct group* g = getgrnam(group.c_str());
    if (g == nullptr) {
      spdlog::error("unknown group \"{}\"", group);
      return 2;
    }
    config.socket_group = g->gr_gid;
  }

  if (!config.store.empty() && !tracetorch::daemon::IsPostgresUrl(config.store)) {
    spdlog::error("tracetorchd: --store '{}' is not a postgresql:// URL", config.store);
    return 2;
  }
  if (absl::Status s = tracetorch::daemon::ValidateRemoteAccess(config); !s.ok()) {
    spdlog::error("tracetorchd: {}", std::string(s.message()));
    return 2;
  }

  // Signals are taken synchronously by this thread; every thread started below inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(std::move(config));
  if (!daemon.ok()) {
    spdlog::error("tracetorchd cannot start: {}", std::string(daemon.status().message()));
    return 1;
  }
  int sig = 0;
  while (sigwait(&signals, &sig) == 0) {
    if (sig == SIGHUP) {
      spdlog::info("SIGHUP: writing snapshots");
      (*daemon)->sessions().WriteDueSnapshots();
      continue;
    }
    break;
  }
  spdlog::info("signal {}: shutting down", sig);
  (*daemon)->Shutdown();
  return 0;
}
