// The sender thread's connection to tracetorchd's ingest socket, as socket I/O only: connecting
// with a deadline, writing a whole buffer without blocking past a deadline, and reading
// length-prefixed frames (protocol/wire.h: a 4-byte little-endian length, then the payload).
// What the frames mean is the caller's business (client/daemon_client.cc).
//
// Nothing here blocks longer than its deadline. Every wait is a poll(2) of at most 50 ms that then
// checks `abort` (when given): once that flag is true, a wait ends as if its deadline had passed,
// so DaemonClient::Close() can cut a stalled write short. Writes use MSG_NOSIGNAL: a peer that
// went away is an error, never a SIGPIPE. Errors name tracetorchd, for DaemonClientStats and logs:
//   Unavailable       "connect to tracetorchd at PATH: No such file or directory" (no daemon, a
//                     full listen queue, ...; also ": timed out"), "tracetorchd closed the
//                     connection", "write to tracetorchd: Broken pipe", "recv from tracetorchd:
//                     ..."
//   DeadlineExceeded  "write to tracetorchd timed out" (the peer stopped reading)
//   ResourceExhausted a frame longer than `max_frame_bytes`
//
// Example:
//   absl::StatusOr<FrameSocket> socket = FrameSocket::ConnectUnix(path, deadline, &abort);
//   if (!socket.ok()) return socket.status();
//   absl::Status s = socket->WriteAll(frames, absl::Now() + absl::Seconds(5));
//   absl::StatusOr<std::optional<std::string>> reply = socket->ReadFrame();  // Never waits.
//   while (reply.ok() && !reply->has_value() && socket->WaitReadable(deadline)) {
//     reply = socket->ReadFrame();
//   }
//
// Thread-compatible: one thread uses a FrameSocket; `abort` may be set from any thread.
#ifndef TRACETORCH_CLIENT_FRAME_SOCKET_H_
#define TRACETORCH_CLIENT_FRAME_SOCKET_H_

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tracetorch::client {

class FrameSocket {
 public:
  // What the daemon sends the agent (Welcome, IngestError) is small; anything larger is garbage.
  static constexpr size_t kDefaultMaxFrameBytes = 1 << 20;

  // Adopts `fd`, a connected stream socket, and makes it non-blocking. `abort` (may be null) must
  // outlive the socket.
  FrameSocket(int fd, const std::atomic<bool>* abort,
              size_t max_frame_bytes = kDefaultMaxFrameBytes);
  // Connects to the Unix stream socket at `path` (shorter than sockaddr_un's 108 bytes, as
  // protocol::ParseDaemonAddress ensures). A connection that cannot complete at once is waited for
  // until `deadline` (or `abort`). Unavailable on failure; InvalidArgument for a path too long.
  static absl::StatusOr<FrameSocket> ConnectUnix(const std::string& path, absl::Time deadline,
                                                 const std::atomic<bool>* abort,
                                                 size_t max_frame_bytes = kDefaultMaxFrameBytes);

  FrameSocket(FrameSocket&& other) noexcept;
  FrameSocket& operator=(FrameSocket&& other) noexcept;
  FrameSocket(const FrameSocket&) = delete;
  FrameSocket& operator=(const FrameSocket&) = delete;
  ~FrameSocket();  // Closes the socket.

  // Writes all of `data`, waiting while the peer's receive buffer is full. On an error some of
  // `data` may have been written: the connection is then unusable. `*written` (when given) is set
  // to the number of leading bytes of `data` the kernel took, on success and on error, so that a
  // caller knows which whole frames went out before the connection broke.
  absl::Status WriteAll(std::string_view data, absl::Time deadline, size_t* written = nullptr);
  // WriteAll with `pass_fd` (a descriptor of this process; it stays open here) attached to the
  // first bytes written, as SCM_RIGHTS: the peer receives its own descriptor of the same file with
  // the read that returns those bytes (a peer reading with read() discards it). The flight
  // recorder's memfd goes to the daemon this way with each Hello. pass_fd < 0: plain WriteAll.
  absl::Status WriteAllPassingFd(std::string_view data, int pass_fd, absl::Time deadline);

  // Takes what has arrived, without waiting, and returns the payload of the next complete frame;
  // nullopt when no frame is complete yet. Frames that arrived complete before the peer closed
  // are returned before the Unavailable that says it closed.
  absl::StatusOr<std::optional<std::string>> ReadFrame();

  // Waits up to one poll slice (50 ms) for something to read. False, without waiting, when
  // `deadline` has passed or `abort` is set: stop reading then.
  bool WaitReadable(absl::Time deadline);

  // Half-closes the connection: the peer reads the end of the stream after what was written.
  void ShutdownWrite();

 private:
  bool Aborted() const;
  // The length of the frame at the front of inbox_, once its header has arrived.
  std::optional<size_t> FrontFrameLength() const;

  int fd_ = -1;
  const std::atomic<bool>* abort_ = nullptr;
  size_t max_frame_bytes_ = kDefaultMaxFrameBytes;
  std::string inbox_;  // Bytes received and not yet returned as a frame.
};

}  // namespace tracetorch::client

#endif  // TRACETORCH_CLIENT_FRAME_SOCKET_H_
