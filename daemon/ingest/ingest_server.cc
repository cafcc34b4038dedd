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
#include "absl/time/clock.h"
#include "daemon/core/ingest_connection.h"
#include "daemon/ingest/frame_buffer.h"
#include "protocol/wire.h"
#include "spdlog/spdlog.h"

namespace tracetorch::daemon {
namespace {

// Whether the unread bytes of `fd` begin with HTTP/2's client preface (a gRPC client): "PRI " is
// also, as a frame header, a 541 MB frame that no agent sends.
bool StartsWithHttp2Preface(int fd) {
  char head[4];
  const ssize_t n = recv(fd, head, sizeof(head), MSG_PEEK | MSG_DONTWAIT);
  return n == static_cast<ssize_t>(sizeof(head)) && std::memcmp(head, "PRI ", sizeof(head)) == 0;
}

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

// read(2) that also takes the descriptors the peer passed with these bytes (SCM_RIGHTS) and hands
// them to `conn`.
ssize_t ReceiveWithFds(int fd, char* data, size_t size, IngestConnection& conn) {
  constexpr size_t kMaxFds = 4;
  iovec iov{data, size};
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxFds * sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int passed;
      std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      conn.OnPassedFd(passed);
    }
  }
  return n;
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
                                                                  RateLimitedLog* log,
                                                                  IngestMemoryBudget* budget) {
  absl::StatusOr<sockaddr_un> addr = Address(options.socket_path);
  if (!addr.ok()) return addr.status();
  const size_t budget_bytes = budget != nullptr ? budget->limit() : options.ingest_memory_bytes;
  if (budget_bytes <
      static_cast<size_t>(options.max_frame_bytes) + protocol::wire::kFrameHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ingest memory budget (", budget_bytes,
        " bytes) cannot hold one frame of --max-frame-bytes (", options.max_frame_bytes, ")"));
  }
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
      new IngestServer(std::move(options), manager, counters, log, budget, fd, wake));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

IngestServer::IngestServer(IngestServerOptions options, SessionManager* manager,
                           DaemonCounters* counters, RateLimitedLog* log,
                           IngestMemoryBudget* budget, int listen_fd, int wake_fd)
    : options_(std::move(options)),
      manager_(manager),
      counters_(counters),
      log_(log),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      own_budget_(budget == nullptr
                      ? std::make_unique<IngestMemoryBudget>(options_.ingest_memory_bytes)
                      : nullptr),
      budget_(budget != nullptr ? budget : own_budget_.get()),
      slots_(options_.max_connections, options_.max_connections_per_uid) {}

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
    for (const auto& [slot, c] : connections_) shutdown(c->fd, SHUT_RDWR);  // Wakes the threads.
  }
  budget_->Close();  // Wakes the connections waiting for memory.
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
    ucred cred{};
    socklen_t len = sizeof(cred);
    PeerCredentials peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      peer.pid = cred.pid;
      peer.uid = static_cast<int32_t>(cred.uid);
      peer.gid = static_cast<int32_t>(cred.gid);
    }
    absl::Status refusal;
    if (Admit(fd, peer, &refusal)) continue;
    if (refusal.code() == absl::StatusCode::kCancelled) {  // Stopping.
      close(fd);
      return;
    }
    Bump(counters_->rejected_connections);
    if (refusal.code() == absl::StatusCode::kResourceExhausted) Bump(counters_->limit_hits);
    log_->Warn("connection limit", absl::StrCat("ingest: refusing a connection from uid ", peer.uid,
                                                " (pid ", peer.pid, "): ", refusal.message()));
    std::string out;
    IngestConnection::AppendRejection(refusal, &out);
    timeval tv{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    SendAll(fd, out);
    close(fd);
  }
}

bool IngestServer::Admit(int fd, const PeerCredentials& peer, absl::Status* refusal) {
  auto c = std::make_unique<Connection>();
  c->fd = fd;
  c->peer = peer;
  c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (c->wake_fd < 0) {
    *refusal = absl::UnavailableError(ErrnoText("tracetorchd cannot take a connection", errno));
    return false;
  }
  Connection* raw = c.get();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      close(c->wake_fd);
      *refusal = absl::CancelledError("stopping");
      return false;
    }
    absl::StatusOr<ConnectionSlots::Admission> slot =
        slots_.Acquire(static_cast<uint32_t>(peer.uid));
    if (!slot.ok()) {
      close(c->wake_fd);
      *refusal = slot.status();
      return false;
    }
    if (slot->evicted.has_value()) {
      // Its thread answers and closes it; the slot is this connection's already.
      Bump(counters_->limit_hits);
      auto victim = connections_.find(*slot->evicted);
      if (victim != connections_.end()) {
        victim->second->evicted.store(true, std::memory_order_relaxed);
        const uint64_t one = 1;
        (void)!write(victim->second->wake_fd, &one, sizeof(one));
        connections_.erase(victim);
      }
    }
    c->slot = slot->id;
    c->hello_timeout = slot->scarce
                           ? std::min(options_.hello_timeout, options_.scarce_hello_timeout)
                           : options_.hello_timeout;
    connections_.emplace(c->slot, raw);
    ++active_threads_;
  }
  const uint64_t slot = c->slot;
  const int wake = c->wake_fd;
  try {
    std::thread([this, c = std::move(c)]() mutable { Serve(std::move(c)); }).detach();
  } catch (const std::exception& e) {
    // The lambda, and the Connection with it, is gone.
    log_->Warn("thread", absl::StrCat("ingest: cannot start a connection thread: ", e.what()));
    absl::MutexLock lock(&mu_);
    connections_.erase(slot);
    slots_.Release(slot);
    close(wake);
    --active_threads_;
    *refusal = absl::UnavailableError("tracetorchd cannot start a connection thread");
    return false;
  }
  return true;
}

void IngestServer::Serve(std::unique_ptr<Connection> c) {
  const int fd = c->fd;
  const PeerCredentials peer = c->peer;
  // A daemon never blocks forever on a client that stopped reading.
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  Bump(counters_->connections_open);
  bool viewer = false;

  if (!Allowed(static_cast<uint32_t>(peer.uid), static_cast<uint32_t>(peer.gid))) {
    Bump(counters_->rejected_connections);
    log_->Warn("allow-list", absl::StrCat("ingest: uid ", peer.uid, " gid ", peer.gid, " (pid ",
                                          peer.pid, ") is not in the allow-list"));
    std::string out;
    IngestConnection::AppendRejection(
        absl::PermissionDeniedError("this uid/gid may not stream to tracetorchd"), &out);
    SendAll(fd, out);
  } else {
    const int wake = c->wake_fd;
    IngestConnection conn(manager_, counters_, log_, peer, options_.max_frame_bytes, [wake] {
      const uint64_t one = 1;
      (void)!write(wake, &one, sizeof(one));
    });
    conn.set_flight_monitor(options_.flight_monitor);
    viewer = ReadFrames(*c, conn) == ReadEnd::kViewer;
  }  // ~IngestConnection: the session's listener is gone before the eventfd closes.
  counters_->connections_open.fetch_sub(1, std::memory_order_relaxed);
  {
    absl::MutexLock lock(&mu_);
    // Before close() or the hand-over: nobody may signal or shut down a reused fd number. An
    // evicted connection's entry and slot are gone already.
    auto it = connections_.find(c->slot);
    if (it != connections_.end() && it->second == c.get()) connections_.erase(it);
    slots_.Release(c->slot);
    close(c->wake_fd);
  }
  c.reset();
  if (viewer && options_.serve_viewer) {
    timeval none{0, 0};  // gRPC drives the socket: no send timeout, non-blocking.
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
    const int flags = fcntl(fd, F_GETFL);
    if (flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0) {
      options_.serve_viewer(fd);
    } else {
      close(fd);
    }
  } else {
    if (viewer) {
      log_->Warn("viewer on ingest socket",
                 absl::StrCat("ingest: a gRPC client (pid ", peer.pid,
                              ") connected to the agents' "
                              "socket, which serves no viewers here; closed"));
    }
    close(fd);
  }
  absl::MutexLock lock(&mu_);
  --active_threads_;  // Last touch of `this`: Shutdown() may return right after.
}

IngestServer::ReadEnd IngestServer::ReadFrames(Connection& c, IngestConnection& conn) {
  using protocol::wire::kFrameHeaderBytes;
  const int fd = c.fd;
  FrameBuffer buf(budget_, options_.base_buffer_bytes);
  std::string out;
  const absl::Time accepted = absl::Now();
  absl::Time last_frame = accepted;  // Or the end of the last wait for memory.
  size_t frame_bytes = 0;            // The frame being read, header included; 0: header unread.
  bool first_read = true;            // Nothing read yet: a viewer may be at the other end.
  bool open = true;
  while (open) {
    if (buf.space_size() == 0) {
      // Full: the frame being read (its header checked: the base holds a header) needs more.
      if (!buf.GrowFor(frame_bytes)) break;  // Shutdown.
      last_frame = std::max(last_frame, absl::Now());
    }
    const absl::Time deadline =
        conn.has_session() ? last_frame + options_.idle_timeout : accepted + c.hello_timeout;
    const absl::Duration left = deadline - absl::Now();
    pollfd p[2] = {{fd, POLLIN, 0}, {c.wake_fd, POLLIN, 0}};
    const int ready =
        left <= absl::ZeroDuration()
            ? 0
            : poll(p, 2,
                   static_cast<int>(std::min<int64_t>(
                       absl::ToInt64Milliseconds(left + absl::Milliseconds(1)), 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready > 0 && p[1].revents != 0) {
      uint64_t signals;
      (void)!read(c.wake_fd, &signals, sizeof(signals));
      if (c.evicted.load(std::memory_order_relaxed)) {
        conn.OnEvicted(
            absl::ResourceExhaustedError(absl::StrCat(
                "closed without a Hello after ",
                absl::FormatDuration(absl::Trunc(absl::Now() - accepted, absl::Milliseconds(1))),
                " to make room for a newer connection (the connection slots are full)")),
            &out);
        break;
      }
    }
    conn.AppendDurable(&out);
    if (!out.empty()) {
      const bool sent = SendAll(fd, out);
      out.clear();
      if (!sent) break;
    }
    if (ready == 0) {
      if (absl::Now() < deadline) continue;
      if (conn.has_session() && conn.PeerStopped()) {
        last_frame = absl::Now();  // Stopped, not idle: it is alive and will go on.
        continue;
      }
      conn.OnTimeout(
          absl::DeadlineExceededError(
              conn.has_session()
                  ? absl::StrCat("no complete frame for ",
                                 absl::FormatDuration(options_.idle_timeout))
                  : absl::StrCat("no Hello within ", absl::FormatDuration(c.hello_timeout))),
          &out);
      break;
    }
    if (ready > 0 && p[0].revents == 0) continue;  // Only the wake-up.
    if (first_read && ready > 0) {
      first_read = false;
      if (StartsWithHttp2Preface(fd)) return ReadEnd::kViewer;  // Nothing consumed: gRPC's now.
    }
    const ssize_t n = ready < 0 ? -1 : ReceiveWithFds(fd, buf.space(), buf.space_size(), conn);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      conn.OnClosed(/*truncated=*/!buf.data().empty());
      break;
    }
    buf.Commit(static_cast<size_t>(n));
    while (buf.data().size() >= kFrameHeaderBytes) {
      if (frame_bytes == 0) {
        const uint32_t length = protocol::wire::GetFrameHeader(buf.data().data());
        if (!conn.OnFrameHeader(length, &out)) {
          open = false;
          break;
        }
        frame_bytes = kFrameHeaderBytes + length;
      }
      if (buf.data().size() < frame_bytes) break;
      const bool ok =
          conn.OnFrame(buf.data().substr(kFrameHeaderBytes, frame_bytes - kFrameHeaderBytes), &out);
      buf.Consume(frame_bytes);  // A grown buffer goes back to its base size here.
      frame_bytes = 0;
      last_frame = absl::Now();
      if (!ok) {
        open = false;
        break;
      }
    }
    if (conn.has_session() && !c.greeted.exchange(true, std::memory_order_relaxed)) {
      absl::MutexLock lock(&mu_);
      slots_.Greeted(c.slot);  // No longer taken to make room.
    }
    if (!out.empty()) {
      if (!SendAll(fd, out)) open = false;
      out.clear();
    }
  }
  if (!out.empty()) SendAll(fd, out);
  conn.OnClosed(/*truncated=*/false);
  return ReadEnd::kClosed;
}

}  // namespace tracetorch::daemon
