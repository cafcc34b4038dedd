// Logs at most one line per cause per interval through spdlog, then how many were suppressed, so
// a misbehaving client cannot flood the daemon's log.
//
// Thread-safe.
#ifndef TRACETORCH_DAEMON_CORE_RATE_LIMITED_LOG_H_
#define TRACETORCH_DAEMON_CORE_RATE_LIMITED_LOG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "spdlog/spdlog.h"

namespace tracetorch::daemon {

class RateLimitedLog {
 public:
  explicit RateLimitedLog(absl::Duration interval = absl::Seconds(10)) : interval_(interval) {}

  // Logs `message` at warning level unless `cause` was logged less than `interval` ago.
  void Warn(std::string_view cause, std::string_view message) ABSL_LOCKS_EXCLUDED(mu_) {
    uint64_t suppressed = 0;
    {
      absl::MutexLock lock(&mu_);
      State& s = causes_[std::string(cause)];
      const absl::Time now = absl::Now();
      if (now - s.last < interval_) {
        ++s.suppressed;
        return;
      }
      s.last = now;
      suppressed = s.suppressed;
      s.suppressed = 0;
    }
    if (suppressed > 0) {
      spdlog::warn("{} ({} similar suppressed)", message, suppressed);
    } else {
      spdlog::warn("{}", message);
    }
  }

 private:
  struct State {
    absl::Time last = absl::InfinitePast();
    uint64_t suppressed = 0;
  };
  const absl::Duration interval_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, State> causes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_RATE_LIMITED_LOG_H_
