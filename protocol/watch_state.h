// A viewer's copy of what it watches, kept current from WatchUpdates (service.proto): a full
// snapshot replaces it, a delta is merged into it (layers by full_name, history by full_name: an
// entry with append = true continues the copy — first thinned as thin_before_step says, then its
// points from steps[0] on replace the copy's — else it replaces the copy; the session info,
// metadata, anomalies and NaN origin of a delta replace the old ones), a job snapshot replaces the
// job view. Used by `tracetorch watch --remote` and by tests that check what viewers received.
//
// Thread-compatible.
#ifndef TRACETORCH_PROTOCOL_WATCH_STATE_H_
#define TRACETORCH_PROTOCOL_WATCH_STATE_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::protocol {

class WatchState {
 public:
  // Applies one update, all or nothing. FailedPrecondition for a delta before any full snapshot
  // or one appending to a layer history this viewer does not hold (the caller should
  // re-subscribe); InvalidArgument for an empty update, an appended history entry whose fields
  // differ in length, or a whole (not appended) history entry with thin_before_step. session_ended
  // and shutdown are recorded (ended(), shutdown()) and leave the snapshot as it was.
  absl::Status Apply(const v1::WatchUpdate& update);

  bool has_snapshot() const { return snapshot_.has_value(); }
  const v1::Snapshot& snapshot() const { return *snapshot_; }  // REQUIRES: has_snapshot().
  bool has_job() const { return job_.has_value(); }
  const v1::JobSnapshot& job() const { return *job_; }  // REQUIRES: has_job().

  // The session_ended info once received.
  const std::optional<v1::SessionInfo>& ended() const { return ended_; }
  bool shutdown() const { return shutdown_; }
  uint64_t last_sequence() const { return last_sequence_; }
  uint64_t updates() const { return updates_; }

 private:
  std::optional<v1::Snapshot> snapshot_;
  std::optional<v1::JobSnapshot> job_;
  std::optional<v1::SessionInfo> ended_;
  bool shutdown_ = false;
  uint64_t last_sequence_ = 0;
  uint64_t updates_ = 0;
};

}  // namespace tracetorch::protocol

#endif  // TRACETORCH_PROTOCOL_WATCH_STATE_H_
