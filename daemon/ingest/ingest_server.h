// The ingest listener: a SOCK_STREAM Unix socket (mode 0660) speaking the framing of agent.proto,
// one thread per agent connection (bounded by max_connections) driving an IngestConnection.
// Transport only: all protocol and session logic lives in IngestConnection and SessionManager.
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

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/counters.h"
#include "daemon/core/rate_limited_log.h"
#include "daemon/core/session_manager.h"

namespace tracetorch::daemon {

struct IngestServerOptions {
  std::string socket_path;
  uint32_t max_frame_bytes = 16u << 20;
  // Connections beyond this are answered with a fatal IngestError (ResourceExhausted) and closed,
  // counted in rejected_connections and limit_hits.
  size_t max_connections = 512;
  // Peers allowed to connect besides the socket's file permissions. Both empty: anyone who can
  // open the socket. Otherwise a peer whose uid is in allowed_uids or gid in allowed_gids.
  std::vector<uint32_t> allowed_uids;
  std::vector<uint32_t> allowed_gids;
  std::optional<gid_t> socket_group;  // The socket's group (SetSocketAccess).
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
  // Claims the path (ClaimSocketPath), binds, sets the socket's access (SetSocketAccess: a failure
  // unlinks the socket and is returned), listens, then accepts in a background thread.
  static absl::StatusOr<std::unique_ptr<IngestServer>> Start(IngestServerOptions options,
                                                             SessionManager* manager,
                                                             DaemonCounters* counters,
                                                             RateLimitedLog* log);
  ~IngestServer();
  IngestServer(const IngestServer&) = delete;
  IngestServer& operator=(const IngestServer&) = delete;

  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  IngestServer(IngestServerOptions options, SessionManager* manager, DaemonCounters* counters,
               RateLimitedLog* log, int listen_fd, int wake_fd);
  void AcceptLoop();
  void Serve(int fd);
  bool Allowed(uint32_t uid, uint32_t gid) const;

  const IngestServerOptions options_;
  SessionManager* const manager_;
  DaemonCounters* const counters_;
  RateLimitedLog* const log_;
  const int listen_fd_;
  const int wake_fd_;  // eventfd: wakes the accept loop at shutdown.
  std::thread accept_thread_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<int> connections_ ABSL_GUARDED_BY(mu_);  // Open connection fds.
  size_t active_threads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_INGEST_INGEST_SERVER_H_
