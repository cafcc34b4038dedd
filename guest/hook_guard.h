// The one exception boundary for callbacks from the host program (torch hooks, RecordFunction
// observers, autograd node hooks, our own threads' loops): no exception of ours ever reaches the
// training loop. A callback that fails is counted and logged once per cause (guest/log.h), and
// tracing goes on.
//
// Example:
//   HookErrors errors;  // One per traced session; its count goes into metadata hook_errors.
//   GuardHook(errors, "grad_ready", [&] { OnGradReady(node, grads); });
//
// Thread-safe.
#ifndef TRACETORCH_GUEST_HOOK_GUARD_H_
#define TRACETORCH_GUEST_HOOK_GUARD_H_

#include <atomic>
#include <cstdint>
#include <exception>
#include <string_view>
#include <utility>

namespace tracetorch::guest {

class HookErrors {
 public:
  // Counts one failure of `cause` ("begin_call", "grad_ready", ...) and logs
  // "tracetorch: hook error (cause): message; ..." the first time this cause is seen in the
  // process (WarnOnce: silent in a forked child). Never throws.
  void Record(std::string_view cause, std::string_view message) noexcept;

  int64_t count() const { return count_.load(std::memory_order_relaxed); }
  void Reset() { count_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> count_{0};
};

// Runs `fn()`. An exception it throws is caught and recorded under `cause`; true when fn
// returned normally.
template <typename Fn>
bool GuardHook(HookErrors& errors, std::string_view cause, Fn&& fn) noexcept {
  try {
    std::forward<Fn>(fn)();
    return true;
  } catch (const std::exception& e) {
    errors.Record(cause, e.what());
  } catch (...) {
    errors.Record(cause, "unknown exception");
  }
  return false;
}

}  // namespace tracetorch::guest

#endif  // TRACETORCH_GUEST_HOOK_GUARD_H_
