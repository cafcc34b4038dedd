#include "daemon/core/crash_point.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"

namespace tracetorch::daemon {
namespace {

struct PausePlan {
  bool armed = false;
  std::string point;
  uint64_t nth = 0;
  std::string marker;
  std::atomic<uint64_t> calls{0};
};

// Parsed once; never freed (it may be in use by a paused thread at exit).
PausePlan* Plan() {
  static PausePlan* const plan = [] {
    auto* p = new PausePlan;
    const char* env = std::getenv(kCrashPointEnv);
    if (env == nullptr) return p;
    std::vector<std::string> parts = absl::StrSplit(env, absl::MaxSplits(':', 2));
    if (parts.size() != 3 || parts[0].empty() || parts[2].empty() ||
        !absl::SimpleAtoi(parts[1], &p->nth) || p->nth == 0) {
      return p;
    }
    p->point = parts[0];
    p->marker = parts[2];
    p->armed = true;
    return p;
  }();
  return plan;
}

}  // namespace

void CrashPoint(std::string_view point) {
  PausePlan* plan = Plan();
  if (!plan->armed || point != plan->point) return;
  if (plan->calls.fetch_add(1, std::memory_order_relaxed) + 1 != plan->nth) return;
  const int fd = open(plan->marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
  absl::Notification never;
  never.WaitForNotification();  // Until the test kills the process.
}

}  // namespace tracetorch::daemon
