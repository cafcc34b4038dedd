#include "daemon/core/write_health.h"

#include <atomic>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace tracetorch::daemon {
namespace {

// Captures what spdlog's default logger writes while it lives.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink->set_pattern("%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::vector<std::string> lines() const {
    return absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(WriteHealth, CountsEveryFailureLogsEachCauseOnceAndBacksOff) {
  CapturedLog log;
  std::atomic<uint64_t> errors{0};
  WriteHealth health("snapshot", &errors,
                     {.initial_backoff = absl::Seconds(1), .max_backoff = absl::Seconds(4)});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_TRUE(health.Due(t0));
  EXPECT_FALSE(health.failing());

  const absl::Status full = absl::ResourceExhaustedError("write(x): No space left on device");
  health.Failed(full, t0);
  EXPECT_TRUE(health.failing());
  health.Failed(full, t0 + absl::Milliseconds(500));  // Inside the back-off: counted, no longer.
  EXPECT_FALSE(health.Due(t0 + absl::Milliseconds(999)));
  EXPECT_TRUE(health.Due(t0 + absl::Seconds(1)));
  health.Failed(full, t0 + absl::Seconds(1));  // Back-off 2 s.
  EXPECT_FALSE(health.Due(t0 + absl::Milliseconds(2999)));
  EXPECT_TRUE(health.Due(t0 + absl::Seconds(3)));
  health.Failed(full, t0 + absl::Seconds(3));  // 4 s.
  health.Failed(full, t0 + absl::Seconds(7));  // Capped: 4 s.
  EXPECT_FALSE(health.Due(t0 + absl::Milliseconds(10999)));
  EXPECT_TRUE(health.Due(t0 + absl::Seconds(11)));
  // Another cause is logged; the same one again is not.
  const absl::Status ro = absl::PermissionDeniedError("open(x): Read-only file system");
  health.Failed(ro, t0 + absl::Seconds(11));
  health.Failed(ro, t0 + absl::Seconds(15));
  EXPECT_EQ(errors.load(), 7u);

  health.Succeeded();
  EXPECT_FALSE(health.failing());
  EXPECT_TRUE(health.Due(t0 + absl::Seconds(15)));
  health.Succeeded();                           // Nothing to say twice.
  health.Failed(full, t0 + absl::Seconds(20));  // A new spell: logged again, back-off from 1 s.
  EXPECT_TRUE(health.Due(t0 + absl::Seconds(21)));
  EXPECT_EQ(errors.load(), 8u);

  const std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 4u) << log.lines().size();
  EXPECT_NE(lines[0].find("snapshot write failed: RESOURCE_EXHAUSTED"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("Read-only file system"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("snapshot writes work again after 7 failed"), std::string::npos)
      << lines[2];
  EXPECT_NE(lines[3].find("No space left"), std::string::npos) << lines[3];
}

}  // namespace
}  // namespace tracetorch::daemon
