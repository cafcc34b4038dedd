#include "daemon/ingest/ingest_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/ingest_connection.h"
#include "protocol/wire.h"
#include "spdlog/spdlog.h"

namespace tracetorch::daemon {
namespace {

std::string ErrnoText(absl::string_view what, int err) {
  return absl::StrCat(what, ": ", std::strerror(err));
}

absl::StatusOr<sockaddr_un> Address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path \"", path,
                                                   "\" is empty or longer than ",
                                                   sizeof(addr.sun_path) - 1, " bytes"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

// Writes all of `data` (blocking socket with a send timeout); false on error.
bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status ClaimSocketPath(const std::string& path) {
  absl::StatusOr<sockaddr_un> addr = Address(path);
  if (!addr.ok()) return addr.status();
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(parent, ec)) {
      std::filesystem::create_directories(parent, ec);
      if (ec) {
        return absl::PermissionDeniedError(
            absl::StrCat("cannot create socket directory ", parent.string(), ": ", ec.message()));
      }
      if (chmod(parent.c_str(), 0750) != 0) {
        return absl::PermissionDeniedError(
            ErrnoText(absl::StrCat("chmod 0750 ", parent.string()), errno));
      }
    }
  }
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::PermissionDeniedError(ErrnoText(absl::StrCat("stat ", path), errno));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a socket; refusing to replace it"));
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(ErrnoText("socket", errno));
  const int rc = connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr));
  const int err = errno;
  close(fd);
  if (rc == 0 || err == EAGAIN) {
    return absl::FailedPreconditionError(
        absl::StrCat("another tracetorchd is already serving on ", path,
                     "; stop it first or choose another --socket"));
  }
  if (err != ECONNREFUSED) {
    return absl::FailedPreconditionError(
        ErrnoText(absl::StrCat("cannot probe existing socket ", path), err));
  }
  // Stale: nobody answers.
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::PermissionDeniedError(ErrnoText(absl::StrCat("unlink stale ", path), errno));
  }
  spdlog::info("removed stale socket {}", path);
  return absl::OkStatus();
}

absl::Status SetSocketAccess(const std::string& path, std::optional<gid_t> group) {
  auto failed = [&path](absl::string_view what, int err) {
    return absl::Status(err == EPERM || err == EACCES ? absl::StatusCode::kPermissionDenied
                                                      : absl::StatusCode::kInternal,
                        ErrnoText(absl::StrCat("cannot ", what, " socket ", path), err));
  };
  if (chmod(path.c_str(), 0660) != 0) return failed("set mode 0660 on", errno);
  if (group.has_value() && chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    return failed(absl::StrCat("give group ", *group, " to"), errno);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<IngestServer>> IngestServer::Start(IngestServerOptions options,
                                                                  SessionManager* manager,
                                                                  DaemonCounters* counters,
                                                                  RateLimitedLog* log) {
  absl::StatusOr<sockaddr_un> addr = Address(options.socket_path);
  if (!addr.ok()) return addr.status();
  if (absl::Status s = ClaimSocketPath(options.socket_path); !s.ok()) return s;
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(ErrnoText("socket", errno));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    const int err = errno;
    close(fd);
    return absl::Status(err == EADDRINUSE ? absl::StatusCode::kFailedPrecondition
                                          : absl::StatusCode::kPermissionDenied,
                        ErrnoText(absl::StrCat("bind ", options.socket_path), err));
  }
  // Nobody can connect before listen(), so fixing the mode here leaves no window.
  if (absl::Status s = SetSocketAccess(options.socket_path, options.socket_group); !s.ok()) {
    close(fd);
    unlink(options.socket_path.c_str());
    return s;
  }
  if (listen(fd, 128) != 0) {
    const int err = errno;
    close(fd);
    unlink(options.socket_path.c_str());
    return absl::InternalError(ErrnoText("listen", err));
  }
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    const int err = errno;
    close(fd);
    unlink(options.socket_path.c_str());
    return absl::InternalError(ErrnoText("eventfd", err));
  }
  std::unique_ptr<IngestServer> server(
      new IngestServer(std::move(options), manager, counters, log, fd, wake));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

IngestServer::IngestServer(IngestServerOptions options, SessionManager* manager,
                           DaemonCounters* counters, RateLimitedLog* log, int listen_fd,
                           int wake_fd)
    : options_(std::move(options)),
      manager_(manager),
      counters_(counters),
      log_(log),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd) {}

IngestServer::~IngestServer() {
  Shutdown();
  close(listen_fd_);
  close(wake_fd_);
}

void IngestServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopping_ = true;
    for (int fd : connections_) shutdown(fd, SHUT_RDWR);  // Wakes the connection threads.
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (accept_thread_.joinable()) accept_thread_.join();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](size_t* n) { return *n == 0; }, &active_threads_));
  unlink(options_.socket_path.c_str());
  stopped_ = true;
}

bool IngestServer::Allowed(uint32_t uid, uint32_t gid) const {
  if (options_.allowed_uids.empty() && options_.allowed_gids.empty()) return true;
  return std::find(options_.allowed_uids.begin(), options_.allowed_uids.end(), uid) !=
             options_.allowed_uids.end() ||
         std::find(options_.allowed_gids.begin(), options_.allowed_gids.end(), gid) !=
             options_.allowed_gids.end();
}

void IngestServer::AcceptLoop() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (true) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("ingest: poll failed: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        log_->Warn("accept", ErrnoText("ingest: accept", errno));
        // E.g. EMFILE: back off instead of spinning.
        poll(&fds[1], 1, 100);
      }
      continue;
    }
    Bump(counters_->connections_total);
    bool reject = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) {
        close(fd);
        return;
      }
      if (connections_.size() >= options_.max_connections) {
        reject = true;
      } else {
        connections_.insert(fd);
        ++active_threads_;
      }
    }
    if (reject) {
      Bump(counters_->rejected_connections);
      Bump(counters_->limit_hits);
      log_->Warn("connection limit",
                 absl::StrCat("ingest: refusing a connection: ", options_.max_connections,
                              " connections open (--max-connections)"));
      std::string out;
      IngestConnection::AppendRejection(
          absl::ResourceExhaustedError("tracetorchd connection limit reached"), &out);
      timeval tv{1, 0};
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      SendAll(fd, out);
      close(fd);
      continue;
    }
    try {
      std::thread([this, fd] { Serve(fd); }).detach();
    } catch (const std::exception& e) {
      log_->Warn("thread", absl::StrCat("ingest: cannot start a connection thread: ", e.what()));
      close(fd);
      absl::MutexLock lock(&mu_);
      connections_.erase(fd);
      --active_threads_;
    }
  }
}

void IngestServer::Serve(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  PeerCredentials peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    peer.pid = cred.pid;
    peer.uid = static_cast<int32_t>(cred.uid);
    peer.gid = static_cast<int32_t>(cred.gid);
  }
  // A daemon never blocks forever on a client that stopped reading.
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  Bump(counters_->connections_open);

  std::string out;
  if (!Allowed(static_cast<uint32_t>(peer.uid), static_cast<uint32_t>(peer.gid))) {
    Bump(counters_->rejected_connections);
    log_->Warn("allow-list", absl::StrCat("ingest: uid ", peer.uid, " gid ", peer.gid, " (pid ",
                                          peer.pid, ") is not in the allow-list"));
    IngestConnection::AppendRejection(
        absl::PermissionDeniedError("this uid/gid may not stream to tracetorchd"), &out);
    SendAll(fd, out);
  } else {
    IngestConnection conn(manager_, counters_, log_, peer, options_.max_frame_bytes);
    constexpr size_t kInitialBuffer = 1 << 20;
    std::string buf(kInitialBuffer, '\0');
    size_t begin = 0;  // Unparsed bytes are buf[begin, end).
    size_t end = 0;
    bool open = true;
    bool header_checked = false;
    while (open) {
      if (buf.size() - end < 4096 || begin > buf.size() / 2) {
        // Compact; grow only as far as the frame being read requires.
        std::memmove(buf.data(), buf.data() + begin, end - begin);
        end -= begin;
        begin = 0;
      }
      if (end == buf.size()) buf.resize(buf.size() * 2);
      const ssize_t n = read(fd, buf.data() + end, buf.size() - end);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        conn.OnClosed(/*truncated=*/end > begin);
        break;
      }
      end += static_cast<size_t>(n);
      while (end - begin >= protocol::wire::kFrameHeaderBytes) {
        const uint32_t length = protocol::wire::GetFrameHeader(buf.data() + begin);
        if (!header_checked) {
          if (!conn.OnFrameHeader(length, &out)) {
            open = false;
            break;
          }
          header_checked = true;
        }
        const size_t need = protocol::wire::kFrameHeaderBytes + length;
        if (end - begin < need) {
          if (buf.size() < need) {
            std::memmove(buf.data(), buf.data() + begin, end - begin);
            end -= begin;
            begin = 0;
            buf.resize(need);
          }
          break;
        }
        header_checked = false;
        const bool ok = conn.OnFrame(
            std::string_view(buf.data() + begin + protocol::wire::kFrameHeaderBytes, length), &out);
        begin += need;
        if (!ok) {
          open = false;
          break;
        }
      }
      if (!out.empty()) {
        if (!SendAll(fd, out)) open = false;
        out.clear();
      }
      if (begin == end) begin = end = 0;
    }
    if (!out.empty()) SendAll(fd, out);
    conn.OnClosed(/*truncated=*/false);
  }
  counters_->connections_open.fetch_sub(1, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  connections_.erase(fd);  // Before close(): the fd number may be reused at once.
  close(fd);
  --active_threads_;  // Last touch of `this`: Shutdown() may return right after.
}

}  // namespace tracetorch::daemon
