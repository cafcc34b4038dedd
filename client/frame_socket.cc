#include "client/frame_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "protocol/wire.h"

namespace tracetorch::client {
namespace {

namespace wire = protocol::wire;

constexpr absl::Duration kPollSlice = absl::Milliseconds(50);

std::string ErrnoText(absl::string_view what, int err) {
  return absl::StrCat(what, ": ", std::strerror(err));
}

// Milliseconds for poll(2): what is left until `deadline`, at most one slice, at least 0.
int PollTimeoutMs(absl::Time deadline) {
  const absl::Duration left = std::min(deadline - absl::Now(), kPollSlice);
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
}

}  // namespace

FrameSocket::FrameSocket(int fd, const std::atomic<bool>* abort, size_t max_frame_bytes)
    : fd_(fd), abort_(abort), max_frame_bytes_(max_frame_bytes) {
  if (fd_ >= 0) {
    const int flags = fcntl(fd_, F_GETFL);
    if (flags >= 0 && (flags & O_NONBLOCK) == 0) fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  }
}

FrameSocket::FrameSocket(FrameSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      abort_(other.abort_),
      max_frame_bytes_(other.max_frame_bytes_),
      inbox_(std::move(other.inbox_)) {}

FrameSocket& FrameSocket::operator=(FrameSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    abort_ = other.abort_;
    max_frame_bytes_ = other.max_frame_bytes_;
    inbox_ = std::move(other.inbox_);
  }
  return *this;
}

FrameSocket::~FrameSocket() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<FrameSocket> FrameSocket::ConnectUnix(const std::string& path, absl::Time deadline,
                                                     const std::atomic<bool>* abort,
                                                     size_t max_frame_bytes) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("tracetorchd socket path must be 1 to ",
                                                   sizeof(addr.sun_path) - 1, " bytes: '", path,
                                                   "'"));
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError(ErrnoText("socket", errno));
  FrameSocket socket(fd, abort, max_frame_bytes);
  const std::string what = absl::StrCat("connect to tracetorchd at ", path);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) return socket;
  // A Unix socket connects at once or fails (EAGAIN: the daemon's listen queue is full; the
  // caller backs off). EINPROGRESS is waited for, in case the kernel ever makes us.
  if (errno != EINPROGRESS) return absl::UnavailableError(ErrnoText(what, errno));
  while (true) {
    if (absl::Now() >= deadline || socket.Aborted()) {
      return absl::UnavailableError(absl::StrCat(what, ": timed out"));
    }
    pollfd p{fd, POLLOUT, 0};
    const int ready = poll(&p, 1, PollTimeoutMs(deadline));
    if (ready > 0) break;
    if (ready < 0 && errno != EINTR) return absl::UnavailableError(ErrnoText(what, errno));
  }
  int so_error = 0;
  socklen_t len = sizeof(so_error);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
  if (so_error != 0) return absl::UnavailableError(ErrnoText(what, so_error));
  return socket;
}

bool FrameSocket::Aborted() const {
  return abort_ != nullptr && abort_->load(std::memory_order_relaxed);
}

absl::Status FrameSocket::WriteAll(std::string_view data, absl::Time deadline, size_t* written) {
  size_t unused;
  size_t& done = written != nullptr ? *written : unused;
  done = 0;
  while (!data.empty()) {
    const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      done += static_cast<size_t>(n);
      continue;
    }
    const int err = n < 0 ? errno : EIO;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      if (absl::Now() >= deadline || Aborted()) {
        return absl::DeadlineExceededError("write to tracetorchd timed out");
      }
      pollfd p{fd_, POLLOUT, 0};
      poll(&p, 1, PollTimeoutMs(deadline));
      continue;
    }
    return absl::UnavailableError(ErrnoText("write to tracetorchd", err));
  }
  return absl::OkStatus();
}

absl::Status FrameSocket::WriteAllPassingFd(std::string_view data, int pass_fd,
                                            absl::Time deadline) {
  if (pass_fd < 0 || data.empty()) return WriteAll(data, deadline);
  while (true) {
    iovec iov{const_cast<char*>(data.data()), data.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) return WriteAll(data.substr(static_cast<size_t>(n)), deadline);
    const int err = n < 0 ? errno : EIO;
    if (err == EINTR) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      return absl::UnavailableError(ErrnoText("write to tracetorchd", err));
    }
    if (absl::Now() >= deadline || Aborted()) {
      return absl::DeadlineExceededError("write to tracetorchd timed out");
    }
    pollfd p{fd_, POLLOUT, 0};
    poll(&p, 1, PollTimeoutMs(deadline));
  }
}

std::optional<size_t> FrameSocket::FrontFrameLength() const {
  if (inbox_.size() < wire::kFrameHeaderBytes) return std::nullopt;
  return wire::GetFrameHeader(inbox_.data());
}

absl::StatusOr<std::optional<std::string>> FrameSocket::ReadFrame() {
  // Reads until a frame is complete, nothing more has arrived, or the peer closed.
  bool closed = false;
  auto complete = [this] {
    const std::optional<size_t> length = FrontFrameLength();
    return length.has_value() && inbox_.size() - wire::kFrameHeaderBytes >= *length;
  };
  auto oversized = [this] {
    const std::optional<size_t> length = FrontFrameLength();
    return length.has_value() && *length > max_frame_bytes_;
  };
  while (!complete() && !oversized()) {
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      inbox_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      closed = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return absl::UnavailableError(ErrnoText("recv from tracetorchd", errno));
  }
  if (oversized()) {
    return absl::ResourceExhaustedError(absl::StrCat("tracetorchd sent a frame of ",
                                                     *FrontFrameLength(), " bytes (at most ",
                                                     max_frame_bytes_, " expected)"));
  }
  if (!complete()) {
    if (closed) return absl::UnavailableError("tracetorchd closed the connection");
    return std::optional<std::string>();
  }
  const size_t length = *FrontFrameLength();
  std::string payload = inbox_.substr(wire::kFrameHeaderBytes, length);
  inbox_.erase(0, wire::kFrameHeaderBytes + length);
  return std::optional<std::string>(std::move(payload));
}

bool FrameSocket::WaitReadable(absl::Time deadline) {
  if (absl::Now() >= deadline || Aborted()) return false;
  pollfd p{fd_, POLLIN, 0};
  poll(&p, 1, PollTimeoutMs(deadline));
  return true;
}

void FrameSocket::ShutdownWrite() { shutdown(fd_, SHUT_WR); }

}  // namespace tracetorch::client
