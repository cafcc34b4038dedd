// For tests: a real PostgreSQL server of its own (Debian's `postgresql` package), in a temporary
// directory. initdb makes a fresh cluster (trust authentication, user `tracetorch`); the server
// listens only on a Unix socket in that directory (no TCP port). PostgreSQL refuses to run as
// root, and CI runs as root: then initdb and the server run as nobody (65534), owning the
// directory.
//
// Thread-compatible. Not part of tracetorchd.
#ifndef TRACETORCH_DAEMON_STORE_PG_POSTGRES_SERVER_H_
#define TRACETORCH_DAEMON_STORE_PG_POSTGRES_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tracetorch::daemon::test_util {

class PostgresServer {
 public:
  // initdb + start; waits until it accepts connections. NotFound when the PostgreSQL binaries
  // are not installed (/usr/lib/postgresql/*/bin), Internal when initdb or the server fails
  // (the message has the end of its log).
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start();
  ~PostgresServer();  // Stops the server (fast shutdown) and removes the directory.
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // Stops the server (fast shutdown: connections are cut) and waits for it to exit.
  absl::Status Stop();
  // Starts it again on the same cluster and socket; waits until it accepts connections.
  absl::Status Restart();
  bool running() const { return pid_ > 0; }

  // postgresql:///postgres?host=<dir>&port=<port>&user=tracetorch
  const std::string& url() const { return url_; }

 private:
  PostgresServer() = default;
  absl::Status Launch();
  std::string LogTail() const;

  std::string bindir_;
  std::string dir_;
  std::string url_;
  pid_t pid_ = -1;
};

}  // namespace tracetorch::daemon::test_util

#endif  // TRACETORCH_DAEMON_STORE_PG_POSTGRES_SERVER_H_
