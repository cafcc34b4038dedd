// The agent's connection to tracetorchd: a bounded queue and one background sender thread.
//
// Hooks call EnqueueForward/EnqueueBackward, which encode the event into a bounded in-memory queue
// and return at once: they never touch the network and never wait for the sender. When the queue is
// full the event is dropped and counted; the count reaches the daemon (and the trace metadata) with
// the next batch, heartbeat or End. The sender thread connects in the background, retrying with
// bounded, jittered exponential backoff while the daemon is absent; when a connection breaks
// (daemon restarted) it reconnects and re-declares the session (Hello with resume_session_id, the
// full layer table and sent_events), so the daemon continues the same trace.
//
// Durability and re-send (agent.proto, "Durability and re-send"): every batch frame written is
// also kept, encoded, in a bounded replay buffer (replay_capacity events, replay_max_bytes bytes)
// until the daemon acknowledges that a snapshot on disk holds it (a Durable frame, or the Welcome
// of a resume). After a reconnect the sender writes again, unchanged, the frames above the
// daemon's durable point before anything new, and the daemon skips the events it already holds.
// So a daemon SIGKILLed at any moment loses nothing the buffer still holds: after the resume the
// session's events equal what was offered minus the queue-full drops. What falls out of the
// buffer unacknowledged (stats().replay_evicted_events) and was not durable is counted as dropped
// by the daemon, once. The op graph and NaN origin travel in batches and are re-sent the same way.
// Accounting, in every case: the session's events + dropped + rejected equal the events offered to
// Enqueue*. With replay_capacity 0, or a daemon that acknowledges nothing (an older tracetorchd),
// nothing is re-sent and the daemon counts what it did not take as dropped, as before.
//
// Close() flushes with a bounded wait, sends End, and waits (within the same bound) for the
// daemon to acknowledge the session's final snapshot, which it writes on End: so a daemon killed
// between the End and that snapshot cannot lose the session's tail unseen. It never hangs longer
// than its `wait` plus about two poll slices (~100 ms): after `wait` plus one slice it aborts the
// write in progress, which notices within a slice (client/frame_socket.h does the socket I/O).
// What was sent and not acknowledged durable when Close returns is counted
// (stats().not_durable_events) and makes Close return DeadlineExceeded.
//
// Fork: after fork() the child's copy is inert. Every method returns at once (Enqueue* return
// false, Close returns FailedPrecondition) without touching the parent's socket, thread or mutex
// state; the destructor leaks the copy instead of joining a thread that does not exist in the
// child. The parent is unaffected. (A pthread_atfork child handler bumps a generation counter; each
// call compares it with one relaxed atomic load: guest/fork.h.)
//
// Thread-safe: every method may be called from any thread.
//
// Example:
//   DaemonClientOptions options;
//   options.identity = CurrentProcessIdentity();
//   options.identity.model_name = "resnet18";
//   absl::StatusOr<std::unique_ptr<DaemonClient>> client = DaemonClient::Create(options);
//   if (!client.ok()) return client.status();  // Only a malformed address fails here.
//   (*client)->DeclareLayers({{0, {"fc", "Linear", "fc", 1, 10}}});
//   (*client)->EnqueueForward(event);          // From a hook; never blocks.
//   (*client)->Close(absl::Seconds(1));
#ifndef TRACETORCH_CLIENT_DAEMON_CLIENT_H_
#define TRACETORCH_CLIENT_DAEMON_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "guest/fork.h"
#include "protocol/events.h"
#include "trace/record.h"

namespace tracetorch::client {

struct DaemonClientOptions {
  std::string address;  // Empty: protocol::DefaultDaemonAddress().
  protocol::ProcessIdentity identity;

  size_t queue_capacity = 1 << 16;  // Events (forward + backward) waiting to be sent.
  size_t max_batch_events = 8192;   // Events per EventBatch frame (at most wire::kBatchFrameBytes).
  absl::Duration flush_interval = absl::Milliseconds(20);   // Longest an event waits to be sent.
  absl::Duration heartbeat_interval = absl::Seconds(1);     // While idle.
  absl::Duration initial_backoff = absl::Milliseconds(20);  // Reconnect backoff: doubles,
  absl::Duration max_backoff = absl::Seconds(2);            // capped here, +/-25% jitter.
  absl::Duration handshake_timeout = absl::Seconds(2);      // Hello -> Welcome.
  absl::Duration io_timeout = absl::Seconds(5);  // A write stalled this long breaks the connection.
  uint32_t max_frame_bytes = 16 << 20;           // Must not exceed the daemon's limit.
  // Sent events kept until the daemon acknowledges them durable, and their encoded bytes at most;
  // the oldest go first. 0 events: nothing is kept or re-sent.
  size_t replay_capacity = 1 << 16;
  size_t replay_max_bytes = 32 << 20;
  // The flight recorder's memfd (flight/layout.h), or -1 for none. Create() takes its own
  // duplicate (the caller keeps and closes its descriptor) and attaches it to every Hello
  // (SCM_RIGHTS), with Hello.flight_recorder saying so, so that a restarted daemon gets it again.
  int flight_recorder_fd = -1;
  uint32_t flight_layout_version = 0;
  uint64_t flight_region_bytes = 0;
  // Where the client reports a daemon refusing the session (the live-session limits, another
  // uid's session, a protocol version it does not speak): one line per kind of refusal (status
  // code) for the client's lifetime, whatever the retries; each refusal is also counted
  // (stats().refused_handshakes). Called on the sender thread; must not block or throw. Empty:
  // the line goes to stderr.
  std::function<void(std::string_view)> log;
};

// Counters since Create(). All monotonic except `connected`.
struct DaemonClientStats {
  bool connected = false;
  uint64_t enqueued_events = 0;  // Accepted into the queue.
  uint64_t sent_events = 0;      // Put into batch frames for the daemon (once each: a frame a
                                 // broken connection cut short is re-sent or counted as lost by
                                 // the daemon).
  uint64_t dropped_events = 0;   // Queue full, too large for a frame, or unsent at Close.
  uint64_t resent_events = 0;    // Written again after a reconnect (not durable before).
  uint64_t durable_events = 0;   // The session's stream position the daemon last said is on disk.
  uint64_t replay_held_events = 0;     // In the replay buffer now.
  uint64_t replay_evicted_events = 0;  // Fell out of the buffer before being acknowledged.
  // Set by Close(): events sent that the daemon had not acknowledged durable when Close returned
  // (the replay buffer then; 0 with replay_capacity 0 or a daemon that acknowledges nothing).
  uint64_t not_durable_events = 0;
  uint64_t batches_sent = 0;
  uint64_t bytes_sent = 0;
  uint64_t connects = 0;  // Successful handshakes (the first one and every resume).
  uint64_t connect_failures = 0;
  uint64_t daemon_errors = 0;       // IngestErrors received.
  uint64_t refused_handshakes = 0;  // Hellos answered with an IngestError (the client retries).
  std::string last_error;           // Latest connection or daemon error, for diagnostics.
};

class DaemonClient {
 public:
  // Validates the options and starts the sender thread, which connects in the background: Create
  // does not wait for the daemon and succeeds when it is absent. InvalidArgument for a malformed
  // address (protocol::ParseDaemonAddress), a zero queue_capacity / max_batch_events or a
  // max_frame_bytes under 1024; Internal if the thread cannot start.
  static absl::StatusOr<std::unique_ptr<DaemonClient>> Create(DaemonClientOptions options);

  // Close(absl::Seconds(1)) unless already closed. In a forked child: leaks the copy, see above.
  ~DaemonClient();
  DaemonClient(const DaemonClient&) = delete;
  DaemonClient& operator=(const DaemonClient&) = delete;

  // Declares layers (new ids; an id declared again is ignored). Sent before any event queued after
  // this call; re-sent in full after a reconnect.
  void DeclareLayers(absl::Span<const protocol::LayerDecl> layers);

  // Queue one event, encoded at once. Never blocks on I/O; false when it was dropped (queue full,
  // too large for a frame of max_frame_bytes, closed, or in a forked child).
  bool EnqueueForward(protocol::ForwardEvent event);
  bool EnqueueBackward(const protocol::BackwardEvent& event);

  // Recorded in the next batch (once).
  void SetNanOrigin(const NanOrigin& origin);
  // The op graph document (trace/op_graph_json.h) of the NaN origin's step: sent once, in a batch
  // of its own with the origin set by SetNanOrigin (call that first, with the op named). A graph
  // that cannot fit in one frame (max_frame_bytes) is not sent.
  void SetOpGraph(std::string op_graph_json);
  // Sent with End at Close().
  void SetEndInfo(std::optional<double> total_time_ms, uint64_t hook_errors);

  // Waits until every event queued before the call is done with: written to the daemon, or
  // dropped (a broken connection, an event too large for a frame) and counted in
  // stats().dropped_events. DeadlineExceeded when `timeout` passes first (daemon absent or slow);
  // FailedPrecondition after Close or in a forked child.
  absl::Status Flush(absl::Duration timeout);

  // Waits for a handshake with the daemon (returns at once while connected). DeadlineExceeded when
  // `timeout` passes first; FailedPrecondition in a forked child.
  absl::Status WaitUntilConnected(absl::Duration timeout);

  // Sends what is queued, then End, waits for the daemon to acknowledge everything durable, then
  // closes; waits at most `wait` in all. Events still queued when it gives up are counted as
  // dropped, events sent and not acknowledged in stats().not_durable_events; a connection still up
  // then gets the End all the same (one write of at most a poll slice), so the daemon records a
  // finished session with those drops rather than an aborted one. DeadlineExceeded when
  // the daemon did not take everything, or acknowledge it, in time (the client is closed anyway);
  // FailedPrecondition when already closed or in a forked child.
  absl::Status Close(absl::Duration wait = absl::Seconds(1));

  // The daemon's session id once the first handshake succeeded, else empty.
  std::string session_id() const;
  DaemonClientStats stats() const;

 private:
  class Impl;
  explicit DaemonClient(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  const guest::ForkOwner owner_;  // Inert in a forked child.
};

}  // namespace tracetorch::client

#endif  // TRACETORCH_CLIENT_DAEMON_CLIENT_H_
