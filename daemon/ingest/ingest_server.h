// The ingest listener: a SOCK_STREAM Unix socket (mode 0660) speaking the framing of agent.proto,
// one thread per agent connection (bounded by max_connections, and per peer uid by
// max_connections_per_uid: ConnectionSlots) driving an IngestConnection. Transport only: all
// protocol and session logic lives in IngestConnection and SessionManager.
//
// Memory: each connection reads into a FrameBuffer of base_buffer_bytes that grows with the bytes
// of a larger frame as they arrive, reserved first from one IngestMemoryBudget of
// ingest_memory_bytes shared by all connections; a connection whose frame does not fit waits
// without reading (backpressure on its socket) until others release theirs.
//
// Progress: a connection must complete its Hello within hello_timeout of being accepted
// (scarce_hello_timeout when it took one of the last quarter of its uid's share or of all slots),
// and then a frame at least every idle_timeout (agents heartbeat every second while idle);
// otherwise it is closed with a fatal IngestError (DeadlineExceeded), counted in
// connections_timed_out. Time spent waiting for the memory budget is the daemon's, not the
// peer's: it does not count. When the slots are full, a newcomer takes the slot of the oldest
// connection that has not completed its Hello (ConnectionSlots), which is closed with a fatal
// IngestError (ResourceExhausted), counted in connections_evicted: a flood of idle connections
// from the agents' own uid never locks a real agent out.
//
// Durability: each connection thread sleeps in poll() on its socket and an eventfd the session
// signals whenever a snapshot of it is written (IngestConnection's durable_wake), and then writes
// the Durable frame (IngestConnection::AppendDurable): no polling interval.
//
// Descriptors: connections are read with recvmsg(2); a descriptor a peer passes (SCM_RIGHTS: the
// agent's flight recorder, with its Hello) goes to its IngestConnection, close-on-exec; at most a
// few per read are accepted (the kernel closes the rest). A peer whose process is stopped
// (SIGSTOP, a debugger: IngestConnection::PeerStopped) is not timed out as idle: it is stalled,
// which the flight monitor reports, not gone.
//
// Viewers on the agents' socket: a connection whose first bytes are HTTP/2's client preface
// ("PRI * HTTP/2.0...", what a gRPC client sends first) is a tool that was given this socket's
// path. Once it passes the allow-list it is handed to `serve_viewer` (the daemon's gRPC server),
// so one address names the daemon whatever the socket is called; it stops counting against the
// connection limits. Without `serve_viewer` it is closed, logged once.
//
// Socket access is never best effort: a mode or group that cannot be set (the socket's, or the
// socket directory's when it is created here) is a startup error naming the path, the operation
// and errno's text, since the socket would otherwise be open to other users or closed to the
// group the operator named. The daemon applies the same rules to its gRPC socket (ClaimSocketPath,
// SetSocketAccess).
//
// Thread-safe. Shutdown() (or the destructor) stops accepting, ends every connection (each
// session is released: aborted unless it had ended) and removes the socket file.
#ifndef TRACETORCH_DAEMON_INGEST_INGEST_SERVER_H_
#define TRACETORCH_DAEMON_INGEST_INGEST_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/counters.h"
#include "daemon/core/rate_limited_log.h"
#include "daemon/core/session_manager.h"
#include "daemon/ingest/connection_slots.h"
#include "daemon/ingest/ingest_budget.h"

namespace tracetorch::daemon {

class IngestConnection;
class FlightMonitor;

struct IngestServerOptions {
  std::string socket_path;
  uint32_t max_frame_bytes = 16u << 20;
  // Connections beyond this are answered with a fatal IngestError (ResourceExhausted) and closed,
  // counted in rejected_connections and limit_hits.
  size_t max_connections = 512;
  // Connections from one peer uid at once (ResourceExhausted beyond, counted as above). 0: a
  // quarter of max_connections.
  size_t max_connections_per_uid = 0;
  // Read buffers of all connections beyond their base size, together. Must hold the largest frame
  // (max_frame_bytes + header); Start() refuses less with InvalidArgument.
  size_t ingest_memory_bytes = 256u << 20;
  size_t base_buffer_bytes = 64u << 10;  // Each connection's resident minimum.
  absl::Duration hello_timeout = absl::Seconds(10);
  // The Hello deadline of a connection accepted while slots are scarce (at most hello_timeout).
  absl::Duration scarce_hello_timeout = absl::Seconds(1);
  absl::Duration idle_timeout = absl::Seconds(30);
  // Peers allowed to connect besides the socket's file permissions. Both empty: anyone who can
  // open the socket. Otherwise a peer whose uid is in allowed_uids or gid in allowed_gids.
  std::vector<uint32_t> allowed_uids;
  std::vector<uint32_t> allowed_gids;
  std::optional<gid_t> socket_group;  // The socket's group (SetSocketAccess).
  // Follows every accepted session's process and flight recorder (not owned; must outlive the
  // server). Null: none.
  FlightMonitor* flight_monitor = nullptr;
  // Takes over a viewer's connection (a non-blocking socket whose unread bytes start with the
  // HTTP/2 preface); it owns `fd` from then on. Called on the connection's thread.
  std::function<void(int fd)> serve_viewer;
};

// Makes `path` available for a new listener: FailedPrecondition ("another tracetorchd is already
// serving ...") when something accepts connections there, FailedPrecondition when the path exists
// and is not a socket; a stale socket nobody answers on is unlinked. Creates the parent directory
// (0750) when missing; PermissionDenied when it cannot be created or given that mode.
// InvalidArgument for an empty path or one too long for a socket address.
absl::Status ClaimSocketPath(const std::string& path);

// Gives a socket just bound at `path` mode 0660 and, with `group`, that group (the owner stays).
// PermissionDenied (EPERM, EACCES) or Internal (anything else), naming the path and the
// operation, when either fails. Call it before listen() where the caller controls that, so that
// nobody connects under the wrong mode.
absl::Status SetSocketAccess(const std::string& path, std::optional<gid_t> group);

class IngestServer {
 public:
  // InvalidArgument when ingest_memory_bytes cannot hold a frame of max_frame_bytes. Claims the
  // path (ClaimSocketPath), binds, sets the socket's access (SetSocketAccess: a failure
  // unlinks the socket and is returned), listens, then accepts in a background thread.
  // `budget` (not owned; it must outlive the server) is the memory budget the connections share,
  // for a caller that reports its use; null: the server makes its own of ingest_memory_bytes.
  static absl::StatusOr<std::unique_ptr<IngestServer>> Start(IngestServerOptions options,
                                                             SessionManager* manager,
                                                             DaemonCounters* counters,
                                                             RateLimitedLog* log,
                                                             IngestMemoryBudget* budget = nullptr);
  ~IngestServer();
  IngestServer(const IngestServer&) = delete;
  IngestServer& operator=(const IngestServer&) = delete;

  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // The memory budget the connections share.
  IngestMemoryBudget* budget() const { return budget_; }

 private:
  // One accepted connection, owned by its thread; listed in connections_ while it runs.
  struct Connection {
    int fd = -1;
    int wake_fd = -1;  // eventfd: a snapshot was written, or the connection was evicted.
    PeerCredentials peer;
    uint64_t slot = 0;  // ConnectionSlots id.
    absl::Duration hello_timeout;
    std::atomic<bool> evicted{false};
    std::atomic<bool> greeted{false};  // Told to slots_ (Greeted) once the Hello is accepted.
  };

  IngestServer(IngestServerOptions options, SessionManager* manager, DaemonCounters* counters,
               RateLimitedLog* log, IngestMemoryBudget* budget, int listen_fd, int wake_fd);
  void AcceptLoop();
  // Takes a slot for `fd` (evicting an idle connection when full) and starts its thread; false
  // when refused (the caller answers and closes `fd`), `refusal` saying why.
  bool Admit(int fd, const PeerCredentials& peer, absl::Status* refusal) ABSL_LOCKS_EXCLUDED(mu_);
  void Serve(std::unique_ptr<Connection> c);
  // How a connection's reading ended: the peer is gone (or was closed), or it is a viewer.
  enum class ReadEnd { kClosed, kViewer };
  ReadEnd ReadFrames(Connection& c, IngestConnection& conn);
  bool Allowed(uint32_t uid, uint32_t gid) const;

  const IngestServerOptions options_;
  SessionManager* const manager_;
  DaemonCounters* const counters_;
  RateLimitedLog* const log_;
  const int listen_fd_;
  const int wake_fd_;  // eventfd: wakes the accept loop at shutdown.
  std::thread accept_thread_;
  std::unique_ptr<IngestMemoryBudget> own_budget_;  // When Start() was given none.
  IngestMemoryBudget* const budget_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<uint64_t, Connection*> connections_ ABSL_GUARDED_BY(mu_);  // By slot.
  ConnectionSlots slots_ ABSL_GUARDED_BY(mu_);
  size_t active_threads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_INGEST_INGEST_SERVER_H_
