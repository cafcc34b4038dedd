// The logger of our code inside a host program: the spdlog logger named "tracetorch" (created on
// first use, writing to stderr at level warn unless the host already registered a logger of that
// name), and a once-per-cause helper so that a hook failing on every call logs one line, not
// millions. Never std::cout: the host owns its streams.
//
// Thread-safe.
#ifndef TRACETORCH_GUEST_LOG_H_
#define TRACETORCH_GUEST_LOG_H_

#include <memory>
#include <string_view>

#include "spdlog/logger.h"

namespace tracetorch::guest {

// Never null.
std::shared_ptr<spdlog::logger> Logger();

// Logs `message` at warn level the first time `cause` is seen in this process; later calls with
// the same cause are silent. Returns true when it logged.
//
// Fork: in a child forked after the first call, WarnOnce logs nothing and returns false (its lock,
// or the logger's, may be held by a thread that does not exist in the child): the child is
// silent, never deadlocked.
bool WarnOnce(std::string_view cause, std::string_view message);

}  // namespace tracetorch::guest

#endif  // TRACETORCH_GUEST_LOG_H_
