#include "guest/hook_guard.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "guest/log.h"

namespace tracetorch::guest {

void HookErrors::Record(std::string_view cause, std::string_view message) noexcept {
  count_.fetch_add(1, std::memory_order_relaxed);
  try {
    WarnOnce(cause, absl::StrCat("tracetorch: hook error (", std::string(cause),
                                 "): ", std::string(message),
                                 "; tracing continues, later errors of this kind are only counted "
                                 "in metadata hook_errors"));
  } catch (...) {
    // Out of memory while logging: the count above is what remains.
  }
}

}  // namespace tracetorch::guest
