// What the daemon knows of a session's process beyond its event stream: where the flight recorder
// says it is, whether it is stalled, and how it ended. Plain values: the FlightMonitor
// (daemon/core/flight_monitor.h) fills them, a Session carries the latest (Session::SetFlight) and
// reports them in its SessionInfo (tracetorch.v1.FlightStatus).
#ifndef TRACETORCH_DAEMON_CORE_FLIGHT_STATUS_H_
#define TRACETORCH_DAEMON_CORE_FLIGHT_STATUS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace tracetorch::daemon {

// How a process ended (process_probe.h).
struct ProcessExit {
  bool known = false;  // False: the daemon did not see how (reaped first, not permitted, ...).
  int signal = 0;      // The signal that ended it; 0 when it exited.
  int code = 0;        // Its exit code when it exited.
  bool core_dumped = false;
  std::string description;  // "killed by SIGKILL", "exited with code 3", or why it is unknown.
  bool operator==(const ProcessExit&) const = default;
};

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
  std::optional<absl::Duration> median_step;
  uint32_t stalls = 0;  // Stall episodes so far.
  std::optional<ProcessExit> exit;
  uint32_t bundles = 0;  // Forensic bundles written.
  bool operator==(const FlightStatus&) const = default;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_FLIGHT_STATUS_H_
