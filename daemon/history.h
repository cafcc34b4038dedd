// Bounded per-step history of one layer, for live views (proto LayerHistory).
//
// Keeps at most `capacity` points. When full, the older half is thinned to every other point, so
// the newest steps stay at full resolution and older ones become geometrically sparser: memory is
// O(capacity) whatever the run length.
//
// Thread-compatible: the owning Session serialises access.
#ifndef TRACETORCH_DAEMON_HISTORY_H_
#define TRACETORCH_DAEMON_HISTORY_H_

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
};

class LayerHistory {
 public:
  // REQUIRES: capacity >= 4.
  explicit LayerHistory(size_t capacity) : capacity_(capacity) {}

  void RecordForward(uint64_t step, std::optional<double> latency_ms,
                     std::optional<double> output_std, bool non_finite);
  void RecordBackward(uint64_t step, std::optional<double> grad_norm, bool non_finite);

  // Oldest first.
  const std::vector<HistoryPoint>& points() const { return points_; }

 private:
  // The point for `step`: found among the last few, or appended when newer than all; nullptr for
  // an old step no longer in reach (ignored).
  HistoryPoint* PointFor(uint64_t step);

  const size_t capacity_;
  std::vector<HistoryPoint> points_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_HISTORY_H_
