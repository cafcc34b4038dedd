#include "agent/pending_results.h"

#include <algorithm>

namespace tracetorch::agent {

bool Completion::WaitUntil(absl::Time deadline) {
  absl::Duration pause = absl::Microseconds(50);
  while (!Done()) {
    const absl::Time now = absl::Now();
    if (now >= deadline) return false;
    absl::SleepFor(std::min(pause, deadline - now));
    pause = std::min(pause * 2, absl::Milliseconds(5));
  }
  return true;
}

}  // namespace tracetorch::agent
