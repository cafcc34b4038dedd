// The one retry back-off: exponential from `initial`, doubling up to `max`, each wait jittered by
// +/- `jitter` (a fraction, default 25%) so that many clients that lost the same daemon do not
// retry in lock-step.
//
// Example:
//   Backoff backoff({.initial = absl::Milliseconds(20), .max = absl::Seconds(2)});
//   while (!Connect().ok()) stop.WaitForNotificationWithTimeout(backoff.Next());
//   backoff.Reset();  // After a success.
//
// Thread-compatible: one Backoff per retry loop.
#ifndef TRACETORCH_GUEST_BACKOFF_H_
#define TRACETORCH_GUEST_BACKOFF_H_

#include <cstdint>

#include "absl/time/time.h"

namespace tracetorch::guest {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(100);
  absl::Duration max = absl::Seconds(2);
  double jitter = 0.25;  // In [0, 1): each wait is in [w * (1 - jitter), w * (1 + jitter)).
  uint64_t seed = 0;     // 0: from the clock and the pid.
};

class Backoff {
 public:
  explicit Backoff(BackoffOptions options);

  // The wait before the next attempt; the following one will be twice as long (up to max).
  absl::Duration Next();
  // Back to `initial`, after a success.
  void Reset() { current_ = options_.initial; }

  // The un-jittered length of the next wait.
  absl::Duration current() const { return current_; }

 private:
  const BackoffOptions options_;
  absl::Duration current_;
  uint64_t state_;  // xorshift64
};

}  // namespace tracetorch::guest

#endif  // TRACETORCH_GUEST_BACKOFF_H_
