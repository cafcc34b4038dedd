#include "agent/watch_flusher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "trace/json.h"

namespace tracetorch::agent {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/tt_flusher_XXXXXX";
  const char* dir = mkdtemp(tmpl);
  return dir == nullptr ? std::string("/tmp") : std::string(dir);
}

// A fake wait: records every wait the flusher asks for and returns at once, so no test sleeps.
// After `waits_before_stop` waits it tells the flusher to stop and notifies `done`.
class FakeWait {
 public:
  explicit FakeWait(int waits_before_stop) : waits_before_stop_(waits_before_stop) {}

  WatchFlusher::WaitFn fn() {
    return [this](absl::Duration d) {
      absl::MutexLock lock(&mu_);
      waits_.push_back(d);
      if (static_cast<int>(waits_.size()) <= waits_before_stop_) return false;
      if (!done.HasBeenNotified()) done.Notify();
      return true;
    };
  }
  std::vector<absl::Duration> waits() {
    absl::MutexLock lock(&mu_);
    return waits_;
  }

  absl::Notification done;

 private:
  const int waits_before_stop_;
  absl::Mutex mu_;
  std::vector<absl::Duration> waits_ ABSL_GUARDED_BY(mu_);
};

TEST(WatchFlusherTest, RejectsBadArguments) {
  auto snapshot = [] { return TraceRecord{}; };
  EXPECT_EQ(WatchFlusher::Start("", absl::Seconds(1), snapshot).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WatchFlusher::Start("/tmp/x.json", absl::Milliseconds(50), snapshot).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WatchFlusher::Start("/tmp/x.json", absl::Seconds(1), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(WatchFlusherTest, WritesASnapshotEveryInterval) {
  const std::string path = TempDir() + "/watch.json";
  FakeWait wait(/*waits_before_stop=*/3);
  std::atomic<int> calls{0};
  auto flusher = WatchFlusher::Start({.path = path,
                                      .interval = absl::Milliseconds(250),
                                      .snapshot =
                                          [&] {
                                            TraceRecord r;
                                            r.metadata.model_name =
                                                "M" + std::to_string(calls.fetch_add(1));
                                            return r;
                                          },
                                      .wait = wait.fn()});
  ASSERT_TRUE(flusher.ok()) << flusher.status();
  wait.done.WaitForNotification();
  (*flusher)->Stop();
  (*flusher)->Stop();  // Idempotent.
  EXPECT_EQ((*flusher)->flush_count(), 3);
  EXPECT_EQ((*flusher)->error_count(), 0);
  EXPECT_EQ(wait.waits(), std::vector<absl::Duration>(4, absl::Milliseconds(250)));
  absl::StatusOr<TraceRecord> read = ReadTraceFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->metadata.model_name, "M2");  // The last snapshot.
}

TEST(WatchFlusherTest, FailingWritesBackOffUpToTheCapWithJitter) {
  FakeWait wait(/*waits_before_stop=*/7);
  auto flusher = WatchFlusher::Start({.path = "/nonexistent_dir_tt/x.json",
                                      .interval = absl::Seconds(3),
                                      .snapshot = [] { return TraceRecord{}; },
                                      .wait = wait.fn()});
  ASSERT_TRUE(flusher.ok());
  wait.done.WaitForNotification();
  (*flusher)->Stop();
  EXPECT_EQ((*flusher)->error_count(), 7);
  EXPECT_EQ((*flusher)->flush_count(), 0);
  const std::vector<absl::Duration> waits = wait.waits();
  ASSERT_EQ(waits.size(), 8u);
  EXPECT_EQ(waits[0], absl::Seconds(3));  // The first flush: one interval, not jittered.
  // After k failures: 3 s x 2^k, capped at 30 s, each within the +/-25% jitter.
  const double base_s[] = {6, 12, 24, 30, 30, 30, 30};
  for (size_t k = 0; k < 7; ++k) {
    EXPECT_GE(waits[k + 1], absl::Seconds(base_s[k] * 0.75)) << k;
    EXPECT_LT(waits[k + 1], absl::Seconds(base_s[k] * 1.25)) << k;
  }
}

TEST(WatchFlusherTest, SnapshotExceptionIsCountedAndASuccessResetsTheWait) {
  const std::string path = TempDir() + "/watch.json";
  FakeWait wait(/*waits_before_stop=*/4);
  std::atomic<int> calls{0};
  auto flusher = WatchFlusher::Start({.path = path,
                                      .interval = absl::Milliseconds(100),
                                      .snapshot = [&]() -> TraceRecord {
                                        if (calls.fetch_add(1) < 2)
                                          throw std::runtime_error("boom");
                                        return TraceRecord{};
                                      },
                                      .wait = wait.fn()});
  ASSERT_TRUE(flusher.ok());
  wait.done.WaitForNotification();
  (*flusher)->Stop();
  EXPECT_EQ((*flusher)->error_count(), 2);
  EXPECT_EQ((*flusher)->flush_count(), 2);
  const std::vector<absl::Duration> waits = wait.waits();
  ASSERT_EQ(waits.size(), 5u);
  EXPECT_GE(waits[2], absl::Milliseconds(300));  // Two failures: 400 ms, jittered.
  EXPECT_EQ(waits[3], absl::Milliseconds(100));  // Back to the interval after a success.
  EXPECT_EQ(waits[4], absl::Milliseconds(100));
}

TEST(WatchFlusherTest, StopWakesTheRealWait) {
  std::atomic<int> calls{0};
  auto flusher = WatchFlusher::Start("/tmp/tt_never.json", absl::Hours(1), [&] {
    ++calls;
    return TraceRecord{};
  });
  ASSERT_TRUE(flusher.ok());
  (*flusher)->Stop();  // Returns only if the hour-long wait is interrupted (ctest's timeout).
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ((*flusher)->flush_count(), 0);
}

TEST(WatchFlusherTest, WritesWithTheRealClock) {
  const std::string path = TempDir() + "/watch.json";
  absl::Notification third;
  std::atomic<int> calls{0};
  auto flusher = WatchFlusher::Start(path, WatchFlusher::kMinInterval, [&] {
    if (calls.fetch_add(1) == 2) third.Notify();
    return TraceRecord{};
  });
  ASSERT_TRUE(flusher.ok());
  third.WaitForNotification();
  (*flusher)->Stop();  // The third flush, in progress, completes first.
  EXPECT_GE((*flusher)->flush_count(), 3);
  EXPECT_TRUE(ReadTraceFile(path).ok());
}

}  // namespace
}  // namespace tracetorch::agent
