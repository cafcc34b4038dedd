#include "guest/log.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "guest/fork.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace tracetorch::guest {
namespace {

constexpr char kLoggerName[] = "tracetorch";
// A bound on the remembered causes: past it every cause counts as seen (nothing more is logged).
constexpr size_t kMaxCauses = 1024;

std::shared_ptr<spdlog::logger> MakeLogger() {
  if (auto existing = spdlog::get(kLoggerName)) return existing;
  try {
    auto logger = spdlog::stderr_color_mt(kLoggerName);
    logger->set_level(spdlog::level::warn);
    return logger;
  } catch (const spdlog::spdlog_ex&) {
    // Registered concurrently by someone else.
    if (auto existing = spdlog::get(kLoggerName)) return existing;
    return std::make_shared<spdlog::logger>(kLoggerName);
  }
}

}  // namespace

std::shared_ptr<spdlog::logger> Logger() {
  // Leaked on purpose: hooks may log during interpreter shutdown.
  static const auto* const logger = new std::shared_ptr<spdlog::logger>(MakeLogger());
  return *logger;
}

bool WarnOnce(std::string_view cause, std::string_view message) {
  static auto* const mu = new absl::Mutex;
  static auto* const seen = new absl::flat_hash_set<std::string>;
  // The process that made the lock: in a forked child another (now gone) thread may hold it, or
  // the logger's own lock, so the child stays silent rather than risk a deadlock.
  static const auto* const owner = new ForkOwner;
  if (owner->InForkedChild()) return false;
  {
    absl::MutexLock lock(mu);
    if (seen->size() >= kMaxCauses || !seen->emplace(cause).second) return false;
  }
  Logger()->warn("{}", message);
  return true;
}

}  // namespace tracetorch::guest
