// Reads a flight recorder region (flight/layout.h) that another thread or process is writing, or
// that a dead process left: the position with its step times, the ring's spans and the names.
//
// The region is hostile input: every offset and length is checked against `size`, and a region
// that is not one (wrong magic, version or geometry) is InvalidArgument, never an out-of-bounds
// read. A position the writer keeps changing under the reader is retried a bounded number of times
// (Unavailable after that: the writer is live and busy, try again); a span overwritten while it was
// copied is dropped and counted (RegionView::torn_spans).
//
// Example:
//   absl::StatusOr<PositionView> p = ReadPosition(base, size);        // cheap: 1 KiB copied
//   absl::StatusOr<RegionView> all = ReadRegion(base, size);          // position, ring, names
//   std::string where = Describe(all->position, all->names);  // "step 12, forward, in fc1"
//
// Thread-safe: pure functions over memory.
#ifndef TRACETORCH_FLIGHT_READER_H_
#define TRACETORCH_FLIGHT_READER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "flight/layout.h"

namespace tracetorch::flight {

struct PositionView {
  uint32_t pid = 0;
  bool recording = false;
  uint64_t step = 0;
  int64_t since_ns = 0;  // CLOCK_MONOTONIC of the latest event.
  uint64_t events = 0;   // Moves iff the process made progress.
  int32_t layer = -1;
  Phase phase = Phase::kIdle;
  Event event = Event::kMark;
  uint32_t tid = 0;
  // Start times (CLOCK_MONOTONIC) of the latest steps up to `step`, oldest first, with their steps.
  std::vector<uint64_t> steps;
  std::vector<int64_t> step_starts_ns;
  // For converting monotonic times to wall-clock ones: the region's creation in both clocks.
  int64_t created_unix_ns = 0;
  int64_t created_monotonic_ns = 0;

  // Wall-clock time of a CLOCK_MONOTONIC time of the writer.
  int64_t ToUnixNs(int64_t monotonic_ns) const {
    return created_unix_ns + (monotonic_ns - created_monotonic_ns);
  }
};

struct SpanView {
  uint64_t step = 0;
  int64_t start_ns = 0;  // CLOCK_MONOTONIC.
  int64_t duration_ns = 0;
  int32_t layer = -1;
  uint32_t tid = 0;
  SpanKind kind = SpanKind::kForward;
  uint32_t flags = 0;
};

struct RegionView {
  PositionView position;
  std::vector<SpanView> spans;  // Oldest first: the ring's content.
  uint64_t spans_written = 0;   // Ever (the ring keeps the latest kRingCapacity).
  uint64_t torn_spans = 0;      // Overwritten while being read (dropped).
  absl::flat_hash_map<int32_t, std::string> names;  // Layer id -> full name.
  uint64_t names_dropped = 0;
};

// The position only. InvalidArgument for a region that is not one; Unavailable when the writer
// moved it under every one of the bounded attempts.
absl::StatusOr<PositionView> ReadPosition(const void* base, size_t size);
// Everything. Errors as ReadPosition.
absl::StatusOr<RegionView> ReadRegion(const void* base, size_t size);
// The name table only; empty for a region that is not one.
absl::flat_hash_map<int32_t, std::string> ReadNames(const void* base, size_t size);

// The median time between consecutive step starts (the latest up to 63); nullopt with fewer
// than two steps.
std::optional<absl::Duration> MedianStepTime(const PositionView& position);

// "step 12, forward, in encoder.layers.5.attn": the phase, and "in X" (entered) or "after X"
// (left X's backward); the model's own code when no layer; "layer 7" for an id without a name.
std::string Describe(const PositionView& position,
                     const absl::flat_hash_map<int32_t, std::string>& names);

// When a position that has not moved is a stall: max(factor x the median step time, floor).
struct StallRule {
  double factor = 10.0;
  absl::Duration floor = absl::Seconds(60);
};
absl::Duration StallThreshold(const StallRule& rule, std::optional<absl::Duration> median_step);

}  // namespace tracetorch::flight

#endif  // TRACETORCH_FLIGHT_READER_H_
