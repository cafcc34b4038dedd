#include "daemon/ingest/frame_buffer.h"

#include <cstring>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tracetorch::daemon {
namespace {

constexpr size_t kBase = 1024;

// Copies `bytes` into the buffer's free space (as read() would), growing it for a frame of
// `frame_bytes` whenever it is full. Returns how many bytes it took (fewer once the buffer holds
// the whole frame), or kRefused if a grow was refused.
constexpr size_t kRefused = ~size_t{0};
size_t Feed(FrameBuffer& buf, std::string_view bytes, size_t frame_bytes) {
  const size_t all = bytes.size();
  while (!bytes.empty()) {
    if (buf.space_size() == 0 && !buf.GrowFor(frame_bytes)) return kRefused;
    if (buf.space_size() == 0) break;  // The frame is all here.
    const size_t n = std::min(bytes.size(), buf.space_size());
    std::memcpy(buf.space(), bytes.data(), n);
    buf.Commit(n);
    bytes.remove_prefix(n);
  }
  return all - bytes.size();
}

// A header claiming a large frame costs the base buffer, not the claim.
TEST(FrameBuffer, AClaimAloneAllocatesNothingBeyondTheBase) {
  IngestMemoryBudget budget(64 << 20);
  FrameBuffer buf(&budget, kBase);
  ASSERT_EQ(Feed(buf, std::string(5, 'h'), 16 << 20), 5u);
  EXPECT_EQ(buf.capacity(), kBase);
  EXPECT_EQ(budget.stats().reserved_bytes, 0u);
}

TEST(FrameBuffer, GrowsWithTheBytesThatArriveAndGivesThemBackAfterTheFrame) {
  constexpr size_t kFrame = 1 << 20;
  IngestMemoryBudget budget(4 << 20);
  FrameBuffer buf(&budget, kBase);
  ASSERT_EQ(Feed(buf, std::string(3 * kBase, 'a'), kFrame), 3 * kBase);
  // Doubling from the base as bytes arrive: 4 KiB now, not the frame's 1 MiB.
  EXPECT_LE(buf.capacity(), 4 * kBase);
  EXPECT_GE(buf.capacity(), 3 * kBase);
  // The budget holds the whole frame's need at once (see ingest_budget.h).
  EXPECT_EQ(budget.stats().reserved_bytes, kFrame - kBase);
  ASSERT_EQ(Feed(buf, std::string(kFrame - 3 * kBase, 'b') + "next", kFrame), kFrame - 3 * kBase);
  EXPECT_EQ(buf.capacity(), kFrame);  // Never past the frame: "next" waits for the next read.
  EXPECT_EQ(buf.data().size(), kFrame);
  buf.Consume(kFrame);
  EXPECT_EQ(buf.capacity(), kBase);
  EXPECT_EQ(budget.stats().reserved_bytes, 0u);
  ASSERT_EQ(Feed(buf, "next", kFrame), 4u);
  EXPECT_EQ(buf.data(), "next");
}

TEST(FrameBuffer, SmallFramesStayInTheBaseBuffer) {
  IngestMemoryBudget budget(1 << 20);
  FrameBuffer buf(&budget, kBase);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(Feed(buf, std::string(300, static_cast<char>('a' + i % 26)), 300), 300u);
    ASSERT_EQ(buf.data().substr(0, 300), std::string(300, static_cast<char>('a' + i % 26)));
    buf.Consume(300);
  }
  EXPECT_EQ(buf.capacity(), kBase);
  EXPECT_EQ(budget.stats().peak_reserved_bytes, 0u);
}

// Two connections whose frames do not fit the budget together: the second waits, then proceeds
// once the first frame is done.
TEST(FrameBuffer, AFrameOverTheBudgetWaitsForAnotherToFinish) {
  constexpr size_t kFrame = 64 * kBase;
  IngestMemoryBudget budget(kFrame);
  FrameBuffer first(&budget, kBase);
  ASSERT_EQ(Feed(first, std::string(kFrame / 2, 'x'), kFrame), kFrame / 2);
  absl::Notification second_grew;
  std::thread other([&] {
    FrameBuffer second(&budget, kBase);
    if (Feed(second, std::string(2 * kBase, 'y'), kFrame) == 2 * kBase) second_grew.Notify();
  });
  budget.AwaitWaitingForTesting(1);
  EXPECT_FALSE(second_grew.HasBeenNotified());
  ASSERT_EQ(Feed(first, std::string(kFrame / 2, 'x'), kFrame), kFrame / 2);
  first.Consume(kFrame);
  second_grew.WaitForNotification();
  other.join();
  EXPECT_EQ(budget.stats().reserved_bytes, 0u);  // The second's buffer released it on its way.
  EXPECT_LE(budget.stats().peak_reserved_bytes, kFrame);
}

}  // namespace
}  // namespace tracetorch::daemon
