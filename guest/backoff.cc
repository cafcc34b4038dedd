#include "guest/backoff.h"

#include <unistd.h>

#include <algorithm>

#include "absl/time/clock.h"

namespace tracetorch::guest {

Backoff::Backoff(BackoffOptions options)
    : options_(options),
      current_(options.initial),
      state_(options.seed != 0
                 ? options.seed
                 : static_cast<uint64_t>(absl::GetCurrentTimeNanos()) ^
                       (static_cast<uint64_t>(getpid()) << 32) ^ 0x9e3779b97f4a7c15ull) {}

absl::Duration Backoff::Next() {
  state_ ^= state_ << 13;
  state_ ^= state_ >> 7;
  state_ ^= state_ << 17;
  const double unit = static_cast<double>(state_ % 1000000) / 1000000.0;  // [0, 1)
  const double factor = 1.0 - options_.jitter + 2.0 * options_.jitter * unit;
  const absl::Duration out = current_ * factor;
  current_ = std::min(current_ * 2, options_.max);
  return out;
}

}  // namespace tracetorch::guest
