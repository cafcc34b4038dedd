// Bounded per-step history of one layer, for live views (proto LayerHistory).
//
// Keeps at most `capacity` points. When full, the older half is thinned to every other point, so
// the newest steps stay at full resolution and older ones become geometrically sparser: memory is
// O(capacity) whatever the run length.
//
// Thread-compatible: the owning Session serialises access.
#ifndef TRACETORCH_DAEMON_CORE_HISTORY_H_
#define TRACETORCH_DAEMON_CORE_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace tracetorch::daemon {

// An unknown value is NaN (the proto's repeated double has no null).
struct HistoryPoint {
  uint64_t step = 0;
  double latency_ms = std::numeric_limits<double>::quiet_NaN();  // Forward, latest call.
  double output_std = std::numeric_limits<double>::quiet_NaN();  // First output.
  double grad_norm = std::numeric_limits<double>::quiet_NaN();
  bool non_finite = false;  // Output NaN/Inf or gradient NaN in this step.
  // The `stamp` of the Record call that last created or changed this point (the owner's version:
  // a reader that saw the history at stamp S needs only the points stamped after S, as long as
  // thinnings() did not move).
  uint64_t stamp = 0;
};

class LayerHistory {
 public:
  // REQUIRES: capacity >= 4. The first thinning comes `stagger` points early (at capacity -
  // stagger points, at least 4), which shifts every later one by stagger / 4 steps (later ones
  // come every capacity / 4 points): histories filled in lockstep (a session's layers, one point
  // per step each) are given different staggers (Stagger()) so that they are not thinned at the
  // same step — a live viewer then receives a few thinned histories whole at each update instead
  // of all of them at once (daemon/core/watch_hub.h).
  explicit LayerHistory(size_t capacity, size_t stagger = 0)
      : capacity_(capacity), thin_at_(capacity > stagger + 4 ? capacity - stagger : 4) {}

  // The stagger of the `index`-th of several histories of `capacity`: 4 * (index mod capacity/4),
  // so that in lockstep they are thinned at steps one apart (every capacity/4 indices repeat).
  static size_t Stagger(size_t index, size_t capacity) {
    const size_t period = capacity / 4 > 0 ? capacity / 4 : 1;
    return 4 * (index % period);
  }

  // Points only change in place (the point of `step`) or are appended, until the history is
  // full: then the older half is thinned (thinnings() counts it) before the new point is appended.
  // `stamp` is stored in the point created or changed (HistoryPoint::stamp).
  void RecordForward(uint64_t step, std::optional<double> latency_ms,
                     std::optional<double> output_std, bool non_finite, uint64_t stamp = 0);
  void RecordBackward(uint64_t step, std::optional<double> grad_norm, bool non_finite,
                      uint64_t stamp = 0);

  // Oldest first, strictly increasing steps.
  const std::vector<HistoryPoint>& points() const { return points_; }
  // How many times the older half was thinned: while it stays the same, a copy of points() taken
  // earlier is a prefix of points() by step, except for points changed since (see stamp).
  uint64_t thinnings() const { return thinnings_; }
  // The latest thinning's boundary: the step of the first point it kept unconditionally (0: never
  // thinned). That thinning kept, among the points with a smaller step, those at even positions
  // (0, 2, 4...) and dropped the others; a copy of points() taken just before it becomes exact
  // again by doing the same, then taking the points changed since (proto thin_before_step).
  uint64_t thin_boundary() const { return thin_boundary_; }

 private:
  // The point for `step`: found among the last few, or appended when newer than all; nullptr for
  // an old step no longer in reach (ignored).
  HistoryPoint* PointFor(uint64_t step);

  const size_t capacity_;
  size_t thin_at_;  // Thin when this many points are held: capacity_ after the first thinning.
  std::vector<HistoryPoint> points_;
  uint64_t thinnings_ = 0;
  uint64_t thin_boundary_ = 0;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_HISTORY_H_
