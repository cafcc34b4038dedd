#include "agent/watch_flusher.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "guest/log.h"
#include "trace/json.h"

namespace tracetorch::agent {

absl::StatusOr<std::unique_ptr<WatchFlusher>> WatchFlusher::Start(std::string path,
                                                                  absl::Duration interval,
                                                                  SnapshotFn snapshot) {
  if (path.empty()) return absl::InvalidArgumentError("watch_path must not be empty");
  if (interval < kMinInterval) {
    return absl::InvalidArgumentError(absl::StrCat("watch_interval_s must be at least ",
                                                   absl::ToDoubleSeconds(kMinInterval), " s, got ",
                                                   absl::ToDoubleSeconds(interval), " s"));
  }
  if (!snapshot) return absl::InvalidArgumentError("no snapshot function");
  std::unique_ptr<WatchFlusher> flusher(
      new WatchFlusher(std::move(path), interval, std::move(snapshot)));
  flusher->thread_ = std::make_unique<std::thread>([f = flusher.get()] { f->Run(); });
  return flusher;
}

WatchFlusher::WatchFlusher(std::string path, absl::Duration interval, SnapshotFn snapshot)
    : path_(std::move(path)),
      interval_(interval),
      snapshot_(std::move(snapshot)),
      owner_pid_(getpid()) {}

WatchFlusher::~WatchFlusher() { Stop(); }

void WatchFlusher::Stop() {
  if (stopped_.exchange(true)) return;
  if (getpid() != owner_pid_) {
    // Forked child: the thread does not exist here and its state may be mid-update. Abandon it.
    (void)thread_.release();
    return;
  }
  stop_.Notify();
  if (thread_ && thread_->joinable()) thread_->join();
}

void WatchFlusher::Run() {
  absl::Duration wait = interval_;
  while (!stop_.WaitForNotificationWithTimeout(wait)) {
    absl::Status status;
    try {
      status = WriteTraceFile(path_, snapshot_());
    } catch (const std::exception& e) {
      status = absl::InternalError(absl::StrCat("snapshot failed: ", e.what()));
    } catch (...) {
      status = absl::InternalError("snapshot failed with an unknown exception");
    }
    if (status.ok()) {
      flushes_.fetch_add(1, std::memory_order_relaxed);
      wait = interval_;
      continue;
    }
    errors_.fetch_add(1, std::memory_order_relaxed);
    guest::WarnOnce(absl::StrCat("watch_flush:", absl::StatusCodeToString(status.code())),
             absl::StrCat("tracetorch: cannot write watch file ", path_, ": ", status.ToString(),
                          " (retrying with backoff)"));
    wait = std::min(wait * 2, kMaxBackoff);
  }
}

}  // namespace tracetorch::agent
