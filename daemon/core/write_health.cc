#include "daemon/core/write_health.h"

#include <utility>

#include "spdlog/spdlog.h"

namespace tracetorch::daemon {

WriteHealth::WriteHealth(std::string what, std::atomic<uint64_t>* errors,
                         WriteHealthOptions options)
    : what_(std::move(what)),
      errors_(errors),
      options_(options),
      // One daemon retrying: no herd to spread out, so no jitter (and tests may count on it).
      backoff_({.initial = options.initial_backoff, .max = options.max_backoff, .jitter = 0}) {}

void WriteHealth::Failed(const absl::Status& status, absl::Time now) {
  if (errors_ != nullptr) errors_->fetch_add(1, std::memory_order_relaxed);
  bool log;
  {
    absl::MutexLock lock(&mu_);
    ++failures_;
    log = logged_ != status.code();
    logged_ = status.code();
    // A due attempt failed (not one made inside the back-off): wait longer.
    if (now >= next_attempt_) next_attempt_ = now + backoff_.Next();
  }
  if (log) {
    spdlog::error(
        "{} write failed: {}; the data stays in memory and agents keep what is not on disk; "
        "retrying with back-off (at most every {}); logged again only for another cause",
        what_, status.ToString(), absl::FormatDuration(options_.max_backoff));
  }
}

void WriteHealth::Succeeded() {
  uint64_t failures;
  {
    absl::MutexLock lock(&mu_);
    if (failures_ == 0) return;
    failures = failures_;
    failures_ = 0;
    logged_.reset();
    backoff_.Reset();
    next_attempt_ = absl::InfinitePast();
  }
  spdlog::warn("{} writes work again after {} failed", what_, failures);
}

bool WriteHealth::Due(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  return now >= next_attempt_;
}

bool WriteHealth::failing() const {
  absl::MutexLock lock(&mu_);
  return failures_ > 0;
}

}  // namespace tracetorch::daemon
