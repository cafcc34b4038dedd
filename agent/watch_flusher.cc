#include "agent/watch_flusher.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "guest/backoff.h"
#include "guest/log.h"
#include "trace/json.h"

namespace tracetorch::agent {

absl::StatusOr<std::unique_ptr<WatchFlusher>> WatchFlusher::Start(Options options) {
  if (options.path.empty()) return absl::InvalidArgumentError("watch_path must not be empty");
  if (options.interval < kMinInterval) {
    return absl::InvalidArgumentError(absl::StrCat("watch_interval_s must be at least ",
                                                   absl::ToDoubleSeconds(kMinInterval), " s, got ",
                                                   absl::ToDoubleSeconds(options.interval), " s"));
  }
  if (!options.snapshot) return absl::InvalidArgumentError("no snapshot function");
  std::unique_ptr<WatchFlusher> flusher(new WatchFlusher(std::move(options)));
  try {
    flusher->thread_ = std::make_unique<std::thread>([f = flusher.get()] { f->Run(); });
  } catch (const std::exception& e) {  // std::system_error: no thread to be had.
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start the watch flusher thread: ", e.what()));
  }
  return flusher;
}

absl::StatusOr<std::unique_ptr<WatchFlusher>> WatchFlusher::Start(std::string path,
                                                                  absl::Duration interval,
                                                                  SnapshotFn snapshot) {
  return Start(
      Options{.path = std::move(path), .interval = interval, .snapshot = std::move(snapshot)});
}

WatchFlusher::WatchFlusher(Options options) : options_(std::move(options)) {}

WatchFlusher::~WatchFlusher() { Stop(); }

void WatchFlusher::Stop() {
  if (stopped_.exchange(true)) return;
  if (fork_owner_.InForkedChild()) {
    // Forked child: the thread does not exist here and its state may be mid-update. Abandon it.
    (void)thread_.release();
    return;
  }
  stop_.Notify();
  if (thread_ && thread_->joinable()) thread_->join();
}

bool WatchFlusher::Wait(absl::Duration wait) {
  if (!options_.wait) return stop_.WaitForNotificationWithTimeout(wait);
  return options_.wait(wait) || stop_.HasBeenNotified();
}

absl::Status WatchFlusher::FlushOnce() {
  try {
    return WriteTraceFile(options_.path, options_.snapshot());
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("snapshot failed: ", e.what()));
  } catch (...) {
    return absl::InternalError("snapshot failed with an unknown exception");
  }
}

void WatchFlusher::Run() {
  // After the first failure the wait is two intervals, then four, ...
  guest::Backoff backoff({.initial = std::min(options_.interval * 2, kMaxBackoff),
                          .max = kMaxBackoff,
                          .jitter = kBackoffJitter,
                          .seed = options_.backoff_seed});
  absl::Duration wait = options_.interval;
  while (!Wait(wait)) {
    const absl::Status status = FlushOnce();
    if (status.ok()) {
      flushes_.fetch_add(1, std::memory_order_relaxed);
      backoff.Reset();
      wait = options_.interval;
      continue;
    }
    errors_.fetch_add(1, std::memory_order_relaxed);
    wait = backoff.Next();
    try {
      guest::WarnOnce(absl::StrCat("watch_flush:", absl::StatusCodeToString(status.code())),
                      absl::StrCat("tracetorch: cannot write watch file ", options_.path, ": ",
                                   status.ToString(), " (retrying with backoff)"));
    } catch (...) {
      // Out of memory while logging: the count above is what remains.
    }
  }
}

}  // namespace tracetorch::agent
