// The agent's one background thread: writes the in-progress trace to a file every interval, so that
// `tracetorch watch` (or any reader) can follow a run while it trains.
//
// Each flush calls the snapshot function and writes the record with WriteTraceFile (atomic: a
// concurrent reader sees a complete old or new file, never a torn one). A failing flush (a write
// error, or an exception from the snapshot function) is counted, logged once per error code in the
// process, and retried with the one back-off (guest/backoff.h): after k failures in a row the wait
// is interval x 2^k, capped at 30 s, each wait jittered by +/-25% (so up to 37.5 s); never a hot
// loop. A success goes back to waiting exactly one interval. Nothing escapes the thread.
//
// Fork: a child process inherits the object but not the thread. Stop() and the destructor in the
// child neither join nor touch the (possibly locked) state: they abandon the thread handle.
//
// Thread-safe: Stop() may be called from any thread, more than once. The snapshot function (and a
// test's wait function) are called from the flusher thread and must be thread-safe themselves.
//
// Example:
//   absl::StatusOr<std::unique_ptr<WatchFlusher>> flusher = WatchFlusher::Start(
//       "/tmp/run/watch.json", absl::Seconds(1), [tracer] { return tracer->Snapshot(); });
//   ... train ...
//   (*flusher)->Stop();
#ifndef TRACETORCH_AGENT_WATCH_FLUSHER_H_
#define TRACETORCH_AGENT_WATCH_FLUSHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "guest/fork.h"
#include "trace/record.h"

namespace tracetorch::agent {

class WatchFlusher {
 public:
  using SnapshotFn = std::function<TraceRecord()>;
  // Waits `wait` before the next flush; returns true when the thread must stop.
  using WaitFn = std::function<bool(absl::Duration wait)>;

  static constexpr absl::Duration kMinInterval = absl::Milliseconds(100);
  static constexpr absl::Duration kMaxBackoff = absl::Seconds(30);
  static constexpr double kBackoffJitter = 0.25;

  struct Options {
    std::string path{};
    absl::Duration interval = absl::Seconds(1);
    SnapshotFn snapshot{};
    // Empty (the default): the thread sleeps, woken early by Stop(). A test passes a fake that
    // records the waits and returns at once, so that no test sleeps; Stop() still ends the loop at
    // the fake's next call.
    WaitFn wait{};
    uint64_t backoff_seed = 0;  // 0: from the clock and the pid (see guest::BackoffOptions).
  };

  // Starts the thread; the first flush happens one interval after the start.
  // InvalidArgument if `path` is empty, `interval` is below kMinInterval, or `snapshot` is empty;
  // ResourceExhausted if no thread can be started.
  static absl::StatusOr<std::unique_ptr<WatchFlusher>> Start(Options options);
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
  explicit WatchFlusher(Options options);
  void Run();
  bool Wait(absl::Duration wait);
  // One snapshot and write; the snapshot function's exceptions become Internal.
  absl::Status FlushOnce();

  // Constant after construction.
  const Options options_;
  const guest::ForkOwner fork_owner_;

  absl::Notification stop_;
  std::atomic<bool> stopped_{false};
  std::unique_ptr<std::thread> thread_;
  std::atomic<int64_t> flushes_{0};
  std::atomic<int64_t> errors_{0};
};

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_WATCH_FLUSHER_H_
