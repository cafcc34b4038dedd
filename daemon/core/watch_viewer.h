// One live viewer's stream as a small state machine: when it is due, what it is sent next, when it
// coalesces and when it closes (the per-viewer rules of daemon/core/watch_hub.h). No locks, no
// sinks, no feeds: the hub tells it what the viewer's link says (a write outstanding, failed,
// cancelled) and what the hub is doing (shutting down), carries out the Step it decides, and
// reports back what it sent.
//
//   kFirst --state--> kStreaming --state at its ticks--> ... --final state--> kEnding
//   kEnding --session_ended--> kTerminal --write done--> closed OK
//   any (not writing) --hub shutting down--> shutdown, kTerminal --write done--> closed OK
//   any --write failed or client gone--> closed CANCELLED once no write is outstanding
//   any --hub's grace period over--> closed (OK after a delivered shutdown, else UNAVAILABLE)
//
// Coalescing: a tick that finds the viewer writing and the feed moved leaves one pending state (the
// version seen at that tick); a later such tick REPLACES it (Step::coalesced, and its sequence
// number is skipped so the viewer sees the gap). Once the write completes, the pending state is
// sent at once, off-tick. The same pending state waits for a state the hub must first prepare
// elsewhere (StateNotReady).
//
// Thread-compatible: the hub's poller drives it.
#ifndef TRACETORCH_DAEMON_CORE_WATCH_VIEWER_H_
#define TRACETORCH_DAEMON_CORE_WATCH_VIEWER_H_

#include <cstdint>
#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {

// The first tick at or after `t`: `phase` plus a multiple of `interval` since the Unix epoch.
// REQUIRES: 0 <= phase.
absl::Time WatchTickAtOrAfter(absl::Time t, absl::Duration interval,
                              absl::Duration phase = absl::ZeroDuration());

class WatchViewer {
 public:
  enum class Phase {
    kFirst,      // Nothing sent yet.
    kStreaming,  // Updates at its ticks.
    kEnding,     // The final state was sent; session_ended next.
    kTerminal,   // session_ended or shutdown was sent; close next.
  };

  // What the viewer's sink callbacks said (WatchHub::WriteDone, Cancel).
  struct Link {
    bool writing = false;  // A write is outstanding.
    bool failed = false;   // A write failed.
    bool cancelled = false;
  };

  // What the hub's pass is.
  struct Pass {
    absl::Time now;
    bool shutting_down = false;  // Shutdown() began: `shutdown` to everyone, then close.
    bool force_close = false;    // The grace period is over: close now, whatever the state.
  };

  // What the hub does for the viewer in this pass.
  struct Step {
    enum class Kind {
      kNothing,       // Nothing now (wake_at() says when it is due).
      kWakeOnWrite,   // A write is outstanding and the viewer has more to say: pass again when
                      // it completes.
      kSendState,     // Send a state at version wanted() or newer, then StateSent(), or
                      // StateNotReady() while it is being prepared, or close with the error.
      kSendEnded,     // Send session_ended (ended()) with `sequence`.
      kSendShutdown,  // Send shutdown with `sequence`.
      kClose,         // Close the stream with `status`; the viewer is done.
    };
    Kind kind = Kind::kNothing;
    uint64_t sequence = 0;   // kSendEnded, kSendShutdown.
    absl::Status status;     // kClose.
    bool coalesced = false;  // A pending state was replaced (count it: updates_coalesced).
  };

  // `interval` as clamped by the hub; `now`: subscription time (its first update is due at once);
  // `phase`: its ticks' offset (WatchTickAtOrAfter), the same for every viewer of one feed.
  WatchViewer(absl::Duration interval, absl::Time now, absl::Duration phase = absl::ZeroDuration());

  // This pass's step. `version` reads the feed's current version; it is called only when the
  // decision depends on it (at a due tick, or for the first state).
  Step Next(const Link& link, const Pass& pass, absl::FunctionRef<uint64_t()> version);

  // After kSendState: the least version the state sent must be at.
  uint64_t wanted() const { return wanted_; }

  // After kSendState: a state at `version` was sent (now). `ended`: it was the final state (the
  // session or job has ended; session_ended with this info follows). Returns its sequence number.
  uint64_t StateSent(uint64_t version, std::optional<v1::SessionInfo> ended, absl::Time now);
  // After kSendState: no state at wanted() or newer exists yet (it is being prepared off the hub
  // thread); the viewer waits as a pending state, served on the pass after it is ready.
  void StateNotReady(absl::Time now);

  Phase phase() const { return phase_; }
  uint64_t base() const { return base_; }  // The version the viewer holds.
  bool pending() const { return pending_; }
  // When a streaming viewer's next tick is due; InfiniteFuture when it waits on nothing timed.
  absl::Time wake_at() const;
  const v1::SessionInfo& ended() const { return ended_; }  // For kSendEnded.

 private:
  // The tick after a send or a skipped tick: on a tick, the next tick after it (never in the past);
  // off-tick, the first tick a whole interval from now.
  absl::Time NextDue(absl::Time now, bool on_tick) const;
  static Step Of(Step::Kind kind);
  Step Close(absl::Status status);
  Step Send(Step::Kind kind);

  const absl::Duration interval_;
  const absl::Duration tick_phase_;
  Phase phase_ = Phase::kFirst;
  absl::Time next_due_;
  uint64_t base_ = 0;
  bool pending_ = false;
  uint64_t pending_version_ = 0;
  uint64_t next_sequence_ = 1;
  uint64_t wanted_ = 0;
  bool on_tick_ = false;  // The kSendState being carried out is a tick's.
  v1::SessionInfo ended_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_WATCH_VIEWER_H_
