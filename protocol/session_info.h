// What tracetorchd says about a session, in plain types: its state, counts and process
// (SessionInfo), the flight recorder's view of it (FlightStatus), what the daemon keeps to continue
// it after a restart (SessionIndexEntry), and a whole snapshot (Snapshot: info, record, per-layer
// history). The daemon's core makes and keeps these; protocol/session_info_proto.h converts them to
// and from tracetorch.v1's messages (service.proto) at the wire and file edges.
//
// Value types, not synchronised. Copy or move freely.
#ifndef TRACETORCH_PROTOCOL_SESSION_INFO_H_
#define TRACETORCH_PROTOCOL_SESSION_INFO_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "protocol/events.h"
#include "trace/record.h"
#include "trace/step_history.h"

namespace tracetorch::protocol {

enum class SessionState {
  kLive,
  kFinished,  // The agent sent End.
  kAborted,   // The connection was lost without an End (process killed, crashed).
};

// How a process ended, as the daemon read it through its pidfd and /proc.
struct ProcessExit {
  bool known = false;  // False: the daemon did not see how (reaped first, not permitted, ...).
  int32_t signal = 0;  // The signal that ended it; 0 when it exited.
  int32_t code = 0;    // Its exit code when it exited.
  bool core_dumped = false;
  std::string description;  // "killed by SIGKILL", "exited with code 3", or why it is unknown.
  bool operator==(const ProcessExit&) const = default;
};

// Where a live session's process is (flight/layout.h) and what the daemon made of it.
struct FlightStatus {
  bool recorder = false;  // The agent passed a flight recorder.
  std::string position;   // flight::Describe(): "step 12, backward, in encoder.layers.5"
  uint64_t step = 0;
  std::string phase;
  std::string layer;  // Full name; empty: the model's own code (or no position yet).
  absl::Time moved = absl::InfinitePast();  // When the daemon last saw the position move.
  absl::Time since = absl::InfinitePast();  // When it moved, by the process's own clock.
  bool stalled = false;
  absl::Time stalled_since = absl::InfinitePast();
  absl::Duration stall_threshold = absl::ZeroDuration();
  std::optional<absl::Duration> median_step;  // Unset: fewer than two steps so far.
  uint32_t stalls = 0;                        // Stall episodes so far.
  std::optional<ProcessExit> exit;
  uint32_t bundles = 0;  // Forensic bundles written.
  bool operator==(const FlightStatus&) const = default;
};

struct SessionInfo {
  std::string session_id;
  SessionState state = SessionState::kLive;
  ProcessIdentity identity;
  absl::Time started = absl::InfinitePast();
  absl::Time ended = absl::InfinitePast();  // InfinitePast while live.
  uint64_t events = 0;                      // Accepted.
  uint64_t dropped_events = 0;              // By the agent, and lost between connections.
  uint64_t rejected_events = 0;             // For undeclared layers.
  // The connecting process as the kernel reported it (SO_PEERCRED); -1 when unknown.
  int32_t peer_uid = -1;
  int32_t peer_gid = -1;
  int32_t peer_pid = -1;
  FlightStatus flight;
  // The NaN origin the agent sent, with when the daemon received it (InfinitePast: none yet).
  std::optional<NanOrigin> nan_origin;
  absl::Time nan_found = absl::InfinitePast();
};

// What tracetorchd keeps of a session to list it after a restart and continue it when its agent
// reconnects (DATA_DIR/index.json, and each snapshot file's accounting).
struct SessionIndexEntry {
  SessionInfo info;
  uint64_t client_dropped_events = 0;  // Reported by the agent.
  uint64_t lost_events = 0;            // Written by the agent, never received (daemon restarts).
  uint64_t last_sequence = 0;          // The highest EventBatch.sequence applied.
};

// A session as a viewer gets it: its info, the trace so far, and its layers' recent per-step
// values, oldest first (an unknown value is NaN; none for a session read back from disk).
struct Snapshot {
  SessionInfo session;
  TraceRecord record;
  StepHistory history;
};

}  // namespace tracetorch::protocol

#endif  // TRACETORCH_PROTOCOL_SESSION_INFO_H_
