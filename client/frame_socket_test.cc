// FrameSocket over socketpair(2) and a listening Unix socket: partial writes, a full buffer
// (EAGAIN), a peer that closed, deadlines and the abort flag, frames cut anywhere.
#include "client/frame_socket.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protocol/wire.h"

namespace tracetorch::client {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace wire = protocol::wire;

std::string Frame(std::string_view payload) {
  std::string out(wire::kFrameHeaderBytes, '\0');
  wire::PutFrameHeader(static_cast<uint32_t>(payload.size()), out.data());
  out.append(payload);
  return out;
}

// A connected pair: `ours` wrapped in a FrameSocket by the test, `peer` a plain blocking fd.
struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    ours = fds[0];
    peer = fds[1];
  }
  ~Pair() {
    if (peer >= 0) close(peer);
  }
  void ClosePeer() {
    close(peer);
    peer = -1;
  }
  // Everything the peer can read until `ours` is closed or `n` bytes arrived.
  std::string PeerRead(size_t n) const {
    std::string got;
    char buf[1 << 16];
    while (got.size() < n) {
      const ssize_t r = read(peer, buf, std::min(sizeof(buf), n - got.size()));
      if (r <= 0) break;
      got.append(buf, static_cast<size_t>(r));
    }
    return got;
  }
  void PeerWrite(std::string_view data) const {
    ASSERT_EQ(write(peer, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }

  int ours = -1;  // Owned by the FrameSocket made from it.
  int peer = -1;
};

// Fills `fd`'s send path until a non-blocking send would block; returns the bytes written.
size_t FillUntilEagain(int fd) {
  const std::string chunk(4096, 'f');
  size_t total = 0;
  while (true) {
    const ssize_t n = send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      total += static_cast<size_t>(n);
      continue;
    }
    EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << std::strerror(errno);
    return total;
  }
}

std::string Pattern(size_t n) {
  std::string data(n, '\0');
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<char>('a' + (i * 7) % 26);
  return data;
}

TEST(FrameSocket, WritesEverythingThroughPartialWrites) {
  Pair pair;
  int small = 4096;
  ASSERT_EQ(setsockopt(pair.ours, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
  FrameSocket socket(pair.ours, nullptr);
  const std::string data = Pattern(4 << 20);  // Far more than the buffers hold: many sends.
  std::string got;
  std::thread reader([&] { got = pair.PeerRead(data.size()); });
  EXPECT_TRUE(socket.WriteAll(data, absl::InfiniteFuture()).ok());
  reader.join();
  EXPECT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
}

TEST(FrameSocket, WaitsOnAFullBufferUntilThePeerReads) {
  Pair pair;
  FrameSocket socket(pair.ours, nullptr);
  const size_t filled = FillUntilEagain(pair.ours);  // The next send gets EAGAIN.
  const std::string data = Pattern(100000);
  absl::Status status = absl::UnknownError("not written");
  std::thread writer([&] { status = socket.WriteAll(data, absl::InfiniteFuture()); });
  const std::string got = pair.PeerRead(filled + data.size());
  writer.join();
  EXPECT_TRUE(status.ok()) << status;
  ASSERT_EQ(got.size(), filled + data.size());
  EXPECT_TRUE(got.substr(filled) == data);
}

TEST(FrameSocket, AFullBufferPastTheDeadlineIsDeadlineExceeded) {
  Pair pair;
  FrameSocket socket(pair.ours, nullptr);
  FillUntilEagain(pair.ours);
  const absl::Status status = socket.WriteAll("more", absl::Now() - absl::Seconds(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(), "write to tracetorchd timed out");
}

TEST(FrameSocket, AbortEndsAWaitingWrite) {
  Pair pair;
  std::atomic<bool> abort{false};
  FrameSocket socket(pair.ours, &abort);
  FillUntilEagain(pair.ours);
  absl::Status status;
  std::thread writer([&] { status = socket.WriteAll("more", absl::InfiniteFuture()); });
  abort.store(true);  // With no deadline, only the flag can end the write.
  writer.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(socket.WaitReadable(absl::InfiniteFuture()));  // Aborted: no more waiting.
}

TEST(FrameSocket, WriteToAClosedPeerIsUnavailableNotSigpipe) {
  Pair pair;
  FrameSocket socket(pair.ours, nullptr);
  pair.ClosePeer();
  const absl::Status status = socket.WriteAll(Pattern(1 << 20), absl::InfiniteFuture());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);  // And the test process lives.
  EXPECT_THAT(std::string(status.message()), StartsWith("write to tracetorchd: "));
}

TEST(FrameSocket, ReadsFramesCutAnywhereAndSeveralAtOnce) {
  Pair pair;
  FrameSocket socket(pair.ours, nullptr);
  const std::string stream = Frame("welcome") + Frame("") + Frame("error");
  // Nothing yet, then a header cut in two, then the rest in one go.
  absl::StatusOr<std::optional<std::string>> frame = socket.ReadFrame();
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_FALSE(frame->has_value());
  pair.PeerWrite(stream.substr(0, 2));
  frame = socket.ReadFrame();
  ASSERT_TRUE(frame.ok());
  EXPECT_FALSE(frame->has_value());
  pair.PeerWrite(stream.substr(2, 5));
  frame = socket.ReadFrame();
  ASSERT_TRUE(frame.ok());
  EXPECT_FALSE(frame->has_value());  // Header and 3 of 7 payload bytes.
  pair.PeerWrite(stream.substr(7));
  for (const std::string want : {"welcome", "", "error"}) {
    frame = socket.ReadFrame();
    ASSERT_TRUE(frame.ok()) << frame.status();
    ASSERT_TRUE(frame->has_value()) << want;
    EXPECT_EQ(**frame, want);
  }
  frame = socket.ReadFrame();
  ASSERT_TRUE(frame.ok());
  EXPECT_FALSE(frame->has_value());
}

TEST(FrameSocket, FramesBeforeThePeerClosedComeFirst) {
  Pair pair;
  FrameSocket socket(pair.ours, nullptr);
  pair.PeerWrite(Frame("last words") + Frame("cut").substr(0, 5));
  pair.ClosePeer();
  absl::StatusOr<std::optional<std::string>> frame = socket.ReadFrame();
  ASSERT_TRUE(frame.ok()) << frame.status();
  ASSERT_TRUE(frame->has_value());
  EXPECT_EQ(**frame, "last words");
  frame = socket.ReadFrame();  // The cut-off frame never completes.
  EXPECT_EQ(frame.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(frame.status().message(), "tracetorchd closed the connection");
}

TEST(FrameSocket, AFrameLongerThanTheLimitIsRefused) {
  Pair pair;
  FrameSocket socket(pair.ours, nullptr, /*max_frame_bytes=*/16);
  pair.PeerWrite(Frame(std::string(16, 'x')));
  absl::StatusOr<std::optional<std::string>> frame = socket.ReadFrame();
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->value_or(""), std::string(16, 'x'));
  pair.PeerWrite(Frame(std::string(17, 'x')).substr(0, 6));  // The header says enough.
  frame = socket.ReadFrame();
  EXPECT_EQ(frame.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(FrameSocket, WaitReadableStopsAtTheDeadline) {
  Pair pair;
  FrameSocket socket(pair.ours, nullptr);
  EXPECT_FALSE(socket.WaitReadable(absl::Now() - absl::Seconds(1)));
  pair.PeerWrite(Frame("x"));
  EXPECT_TRUE(socket.WaitReadable(absl::InfiniteFuture()));
  absl::StatusOr<std::optional<std::string>> frame = socket.ReadFrame();
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(frame->value_or(""), "x");
}

TEST(FrameSocket, ShutdownWriteEndsThePeersStream) {
  Pair pair;
  FrameSocket socket(pair.ours, nullptr);
  ASSERT_TRUE(socket.WriteAll("end", absl::InfiniteFuture()).ok());
  socket.ShutdownWrite();
  EXPECT_EQ(pair.PeerRead(1000), "end");  // Then EOF: the read returns.
}

// A listening Unix socket in a fresh temporary directory.
class Listener {
 public:
  explicit Listener(int backlog) {
    char tmpl[] = "/tmp/ttfs_XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/d.sock";
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path_.data(), path_.size());
    EXPECT_EQ(bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, backlog), 0);
  }
  ~Listener() {
    close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }
  const std::string& dir() const { return dir_; }
  int fd() const { return fd_; }

 private:
  std::string dir_;
  std::string path_;
  int fd_ = -1;
};

TEST(FrameSocket, ConnectsToAListeningSocket) {
  Listener listener(4);
  absl::StatusOr<FrameSocket> socket =
      FrameSocket::ConnectUnix(listener.path(), absl::Now() + absl::Seconds(5), nullptr);
  ASSERT_TRUE(socket.ok()) << socket.status();
  const int accepted = accept(listener.fd(), nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  ASSERT_TRUE(socket->WriteAll("hello", absl::InfiniteFuture()).ok());
  char buf[5];
  EXPECT_EQ(read(accepted, buf, sizeof(buf)), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  close(accepted);
}

TEST(FrameSocket, ConnectWithoutADaemonIsUnavailable) {
  Listener listener(1);
  const std::string missing = listener.dir() + "/nobody.sock";
  absl::StatusOr<FrameSocket> socket =
      FrameSocket::ConnectUnix(missing, absl::Now() + absl::Seconds(5), nullptr);
  EXPECT_EQ(socket.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(socket.status().message(),
            "connect to tracetorchd at " + missing + ": No such file or directory");
  EXPECT_EQ(FrameSocket::ConnectUnix(std::string(200, 'x'), absl::InfiniteFuture(), nullptr)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FrameSocket, AFullListenQueueIsUnavailableAtOnce) {
  Listener listener(0);  // Never accepts.
  std::vector<FrameSocket> queued;
  absl::Status status;
  // Connect until the queue is full; the one after fails instead of waiting (no deadline here).
  for (int i = 0; i < 64 && status.ok(); ++i) {
    absl::StatusOr<FrameSocket> socket =
        FrameSocket::ConnectUnix(listener.path(), absl::InfiniteFuture(), nullptr);
    if (socket.ok()) {
      queued.push_back(*std::move(socket));
    } else {
      status = socket.status();
    }
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr("connect to tracetorchd at "));
}

}  // namespace
}  // namespace tracetorch::client

namespace tracetorch::client {
namespace {

// The flight recorder's memfd travels with the Hello: the peer's recvmsg gets its own descriptor
// of the same file with the first bytes, and the rest of the data follows as usual.
TEST(FrameSocket, PassesADescriptorWithTheFirstBytes) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  FrameSocket socket(fds[0], nullptr);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const std::string data = Frame("hello") + Frame(std::string(100000, 'x'));
  std::thread writer([&] {
    EXPECT_TRUE(socket.WriteAllPassingFd(data, pipe_fds[1], absl::Now() + absl::Seconds(5)).ok());
  });
  std::string got;
  int received = -1;
  while (got.size() < data.size()) {
    char buf[4096];
    iovec iov{buf, sizeof(buf)};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(fds[1], &msg, 0);
    ASSERT_GT(n, 0);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        EXPECT_EQ(received, -1) << "one descriptor, once";
        EXPECT_TRUE(got.empty()) << "with the first bytes";
        std::memcpy(&received, CMSG_DATA(c), sizeof(int));
      }
    }
    got.append(buf, static_cast<size_t>(n));
  }
  writer.join();
  EXPECT_EQ(got, data);
  ASSERT_GE(received, 0);
  // The same pipe: what is written through the received descriptor comes out of ours.
  ASSERT_EQ(write(received, "z", 1), 1);
  char c = 0;
  ASSERT_EQ(read(pipe_fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'z');
  close(received);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  close(fds[1]);
}

}  // namespace
}  // namespace tracetorch::client
