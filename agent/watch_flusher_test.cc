#include "agent/watch_flusher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/time/clock.h"
#include "trace/json.h"

namespace tracetorch::agent {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/tt_flusher_XXXXXX";
  const char* dir = mkdtemp(tmpl);
  return dir == nullptr ? std::string("/tmp") : std::string(dir);
}

TEST(WatchFlusherTest, RejectsBadArguments) {
  auto snapshot = [] { return TraceRecord{}; };
  EXPECT_EQ(WatchFlusher::Start("", absl::Seconds(1), snapshot).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WatchFlusher::Start("/tmp/x.json", absl::Milliseconds(50), snapshot).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WatchFlusher::Start("/tmp/x.json", absl::Seconds(1), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(WatchFlusherTest, WritesSnapshotsPeriodically) {
  const std::string path = TempDir() + "/watch.json";
  std::atomic<int> calls{0};
  auto flusher = WatchFlusher::Start(path, absl::Milliseconds(100), [&] {
    TraceRecord r;
    r.metadata.model_name = "M" + std::to_string(calls.fetch_add(1));
    return r;
  });
  ASSERT_TRUE(flusher.ok()) << flusher.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while ((*flusher)->flush_count() < 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  (*flusher)->Stop();
  (*flusher)->Stop();  // Idempotent.
  EXPECT_GE((*flusher)->flush_count(), 3);
  EXPECT_EQ((*flusher)->error_count(), 0);
  absl::StatusOr<TraceRecord> read = ReadTraceFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->metadata.model_name.substr(0, 1), "M");
}

TEST(WatchFlusherTest, FailingWritesAreCountedAndBackOff) {
  auto flusher = WatchFlusher::Start("/nonexistent_dir_tt/x.json", absl::Milliseconds(100),
                                     [] { return TraceRecord{}; });
  ASSERT_TRUE(flusher.ok());
  absl::SleepFor(absl::Milliseconds(850));
  (*flusher)->Stop();
  // 100 + 200 + 400 ms of backoff: at most three attempts fit, never a hot loop.
  EXPECT_GE((*flusher)->error_count(), 1);
  EXPECT_LE((*flusher)->error_count(), 3);
  EXPECT_EQ((*flusher)->flush_count(), 0);
}

TEST(WatchFlusherTest, SnapshotExceptionIsCaught) {
  auto flusher = WatchFlusher::Start("/tmp/tt_never.json", absl::Milliseconds(100),
                                     []() -> TraceRecord { throw std::runtime_error("boom"); });
  ASSERT_TRUE(flusher.ok());
  absl::SleepFor(absl::Milliseconds(250));
  (*flusher)->Stop();
  EXPECT_GE((*flusher)->error_count(), 1);
}

}  // namespace
}  // namespace tracetorch::agent
