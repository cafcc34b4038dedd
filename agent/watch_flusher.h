// The agent's one background thread: writes the in-progress trace to a file every interval, so that
// `tracetorch watch` (or any reader) can follow a run while it trains.
//
// Each flush calls the snapshot function and writes the record with WriteTraceFile (atomic: a
// concurrent reader sees a complete old or new file, never a torn one). A failing flush is logged
// once per error code and retried with exponential backoff (interval x 2^k, at most 30 s), never in
// a hot loop; the snapshot function's exceptions are caught and count as errors.
//
// Fork: a child process inherits the object but not the thread. Stop() and the destructor in the
// child neither join nor touch the (possibly locked) state: they abandon the thread handle.
//
// Thread-safe: Stop() may be called from any thread, more than once. The snapshot function is
// called from the flusher thread and must be thread-safe itself.
#ifndef TRACETORCH_AGENT_WATCH_FLUSHER_H_
#define TRACETORCH_AGENT_WATCH_FLUSHER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "trace/record.h"

namespace tracetorch::agent {

class WatchFlusher {
 public:
  using SnapshotFn = std::function<TraceRecord()>;

  static constexpr absl::Duration kMinInterval = absl::Milliseconds(100);
  static constexpr absl::Duration kMaxBackoff = absl::Seconds(30);

  // Starts the thread; the first flush happens one interval after the start.
  // InvalidArgument if `path` is empty, `interval` is below kMinInterval, or `snapshot` is empty.
  static absl::StatusOr<std::unique_ptr<WatchFlusher>> Start(std::string path,
                                                             absl::Duration interval,
                                                             SnapshotFn snapshot);

  WatchFlusher(const WatchFlusher&) = delete;
  WatchFlusher& operator=(const WatchFlusher&) = delete;
  ~WatchFlusher();  // Stop().

  // Stops and joins the thread (a flush in progress completes first). Idempotent.
  void Stop();

  int64_t flush_count() const { return flushes_.load(std::memory_order_relaxed); }
  int64_t error_count() const { return errors_.load(std::memory_order_relaxed); }

 private:
  WatchFlusher(std::string path, absl::Duration interval, SnapshotFn snapshot);
  void Run();

  // Constant after construction.
  const std::string path_;
  const absl::Duration interval_;
  const SnapshotFn snapshot_;
  const pid_t owner_pid_;

  absl::Notification stop_;
  std::atomic<bool> stopped_{false};
  std::unique_ptr<std::thread> thread_;
  std::atomic<int64_t> flushes_{0};
  std::atomic<int64_t> errors_{0};
};

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_WATCH_FLUSHER_H_
