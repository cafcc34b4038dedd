#include "guest/fork.h"

#include <pthread.h>

#include <atomic>
#include <mutex>

namespace tracetorch::guest {
namespace {

std::atomic<uint64_t> g_epoch{0};

void OnForkChild() { g_epoch.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

uint64_t ForkEpoch() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, &OnForkChild); });
  return g_epoch.load(std::memory_order_relaxed);
}

}  // namespace tracetorch::guest
