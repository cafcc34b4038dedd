// Process-wide daemon counters behind GetStats (see deploy/METRICS.md). Lock-free: any thread
// increments, GetStats reads. All monotonic except connections_open.
#ifndef TRACETORCH_DAEMON_CORE_COUNTERS_H_
#define TRACETORCH_DAEMON_CORE_COUNTERS_H_

#include <atomic>
#include <cstdint>

namespace tracetorch::daemon {

struct DaemonCounters {
  std::atomic<uint64_t> connections_open{0};
  std::atomic<uint64_t> connections_total{0};
  std::atomic<uint64_t> rejected_connections{0};   // Allow-list, connection/session limits, Hello.
  std::atomic<uint64_t> connections_timed_out{0};  // No Hello in time, or no progress.
  std::atomic<uint64_t> connections_evicted{0};    // No Hello yet, closed to make room.
  std::atomic<uint64_t> rejected_frames{0};  // Oversized, unparseable, truncated, out of order.
  std::atomic<uint64_t> rejected_events{0};  // Undeclared layer ids.
  std::atomic<uint64_t> events_total{0};     // Accepted layer events.
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> limit_hits{0};
  std::atomic<uint64_t> snapshots_written{0};
  std::atomic<uint64_t> snapshot_errors{0};  // Snapshot files that could not be written.
  std::atomic<uint64_t> index_errors{0};     // Index writes that failed.
  std::atomic<uint64_t> baseline_errors{0};  // Baselines that could not be written or removed.
  std::atomic<uint64_t> sessions_evicted{0};
  std::atomic<uint64_t> flight_recorders_refused{0};  // Passed recorders the daemon refused.
};

inline void Bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_COUNTERS_H_
