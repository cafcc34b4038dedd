// One agent connection's protocol state machine, without I/O: the ingest server feeds it frame
// headers and payloads read from the socket and writes back what it appends to `out`.
//
//   OnFrameHeader(len)  -> false: empty, over the frame limit, or a first frame (the Hello) over
//                          kMaxHelloFrameBytes (fatal IngestError appended; close)
//   OnFrame(payload)    -> false: close after writing `out`
//   OnClosed(truncated) -> the socket ended; the session is released (aborted without End)
//
// Rules: the first message must be a Hello (answered with a Welcome, which carries the session's
// durable point when the manager persists sessions, or a fatal IngestError); a frame that does not
// parse, a second Hello, a Hello the SessionManager refuses (protocol version, live-session limits,
// another uid's session), a layer table the session refuses, any message after End and a message
// without a kind are fatal; events for undeclared layers are dropped and counted, with one
// non-fatal IngestError per connection. Everything rejected is counted in DaemonCounters and logged
// once per cause (rate-limited). Durability (agent.proto, "Durability and re-send"): AppendDurable
// tells the agent of each new snapshot of its session; `durable_wake` (when given) is called, from
// the thread that wrote it, whenever one is written, so that the server calls AppendDurable at once
// instead of polling. The End is answered with the session's final snapshot, written before OnFrame
// returns, and its Durable frame: the agent holds the session's tail until then
// (client/daemon_client.h, Close).
// The flight recorder: with a FlightMonitor set, every accepted session is followed by it (its
// process through a pidfd), with the recorder the agent passed with its Hello (OnPassedFd before
// the Hello frame; Hello.flight_recorder set). A recorder that is refused is logged and counted
// (flight_recorders_refused); the session goes on without one.
//
// Thread-compatible: one connection thread drives it.
#ifndef TRACETORCH_DAEMON_CORE_INGEST_CONNECTION_H_
#define TRACETORCH_DAEMON_CORE_INGEST_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/core/counters.h"
#include "daemon/core/flight_monitor.h"
#include "daemon/core/rate_limited_log.h"
#include "daemon/core/session.h"
#include "daemon/core/session_manager.h"

namespace tracetorch::daemon {

class IngestConnection {
 public:
  // The largest first frame: a Hello is a few hundred bytes, and a peer that has not said who it
  // is gets no large buffer.
  static constexpr uint32_t kMaxHelloFrameBytes = 16 << 10;

  IngestConnection(SessionManager* manager, DaemonCounters* counters, RateLimitedLog* log,
                   PeerCredentials peer, uint32_t max_frame_bytes,
                   std::function<void()> durable_wake = {});
  ~IngestConnection();  // OnClosed(false) unless called.
  IngestConnection(const IngestConnection&) = delete;
  IngestConnection& operator=(const IngestConnection&) = delete;

  bool OnFrameHeader(uint32_t length, std::string* out);
  bool OnFrame(std::string_view payload, std::string* out);
  // `truncated`: the stream ended inside a frame (counted as a rejected frame).
  void OnClosed(bool truncated);
  // The server closes the connection for want of progress (no Hello in time, no complete frame
  // for too long): appends a fatal IngestError with `status` (DeadlineExceeded) and counts it in
  // connections_timed_out. Close after writing `out`.
  void OnTimeout(const absl::Status& status, std::string* out);
  // The server closes a connection without a session to make room for another (the slots are
  // full, see daemon/ingest/connection_slots.h): appends a fatal IngestError with `status`
  // (ResourceExhausted) and counts it in connections_evicted. Close after writing `out`.
  void OnEvicted(const absl::Status& status, std::string* out);

  // Appends a Durable frame when the session's snapshot on disk moved past what this connection
  // last told the agent (the Welcome's durable point, or the previous Durable). The server calls
  // it whenever `durable_wake` wakes it.
  void AppendDurable(std::string* out);

  // Whether a Hello was accepted (the connection has a session).
  bool has_session() const { return session_ != nullptr; }

  // The monitor that follows the sessions this connection opens (not owned; null: none). Set
  // before the first frame.
  void set_flight_monitor(FlightMonitor* monitor) { monitor_ = monitor; }
  // A descriptor the peer passed with the bytes read next (SCM_RIGHTS): the connection owns it.
  // The one that came with the Hello is its flight recorder; any other is closed.
  void OnPassedFd(int fd);
  // Whether the peer process is stopped (SIGSTOP, a debugger): alive but sending nothing, which
  // the server does not count as idle.
  bool PeerStopped() const;

  // Appends a fatal IngestError frame and counts a rejected connection (allow-list, connection
  // limit): used by the server before any frame is read.
  static void AppendRejection(const absl::Status& status, std::string* out);

  const std::string& session_id() const { return session_id_; }

 private:
  void HandleOutcome(const BatchOutcome& r, std::string* out);
  // Gives the session back to the manager (which writes its snapshot), once.
  void Release();
  // A Hello was accepted: the monitor follows the session (with the recorder passed, if any).
  void FollowSession(bool has_recorder);
  // Closes the connection over a frame it refuses (counted in rejected_frames): Close().
  bool RejectFrame(std::string_view cause, const absl::Status& status, std::string* out);
  // Closes the connection: logs `cause` (rate limited), counts a connection refused before its
  // Hello was accepted, and appends the fatal error for the agent to `out`. Returns false.
  bool Close(std::string_view cause, const absl::Status& status, std::string* out);

  SessionManager* const manager_;
  DaemonCounters* const counters_;
  RateLimitedLog* const log_;
  const PeerCredentials peer_;
  const uint32_t max_frame_bytes_;
  const std::function<void()> durable_wake_;

  std::shared_ptr<Session> session_;
  uint64_t attachment_ = 0;
  uint64_t listener_ = 0;  // The session's durable listener (durable_wake_), 0 when none.
  std::string session_id_;
  Session::Durable told_;  // The durable point the agent was last told of.
  bool ended_ = false;
  bool released_ = false;  // The session went back to the manager (End, or closed).
  bool closed_ = false;
  bool warned_undeclared_ = false;
  FlightMonitor* monitor_ = nullptr;
  int passed_fd_ = -1;                        // Owned; -1: none.
  std::shared_ptr<ProcessProbe> peer_probe_;  // For PeerStopped(); null when not available.
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_INGEST_CONNECTION_H_
