#include "daemon/ingest/ingest_budget.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tracetorch::daemon {
namespace {

TEST(IngestMemoryBudget, ReservesUpToTheLimitAndCounts) {
  IngestMemoryBudget b(100);
  EXPECT_TRUE(b.Reserve(60));
  EXPECT_TRUE(b.Reserve(40));
  EXPECT_FALSE(b.Reserve(101));  // Could never fit: refused at once, nothing waits.
  IngestBudgetStats s = b.stats();
  EXPECT_EQ(s.limit_bytes, 100u);
  EXPECT_EQ(s.reserved_bytes, 100u);
  EXPECT_EQ(s.peak_reserved_bytes, 100u);
  EXPECT_EQ(s.waits, 0u);
  b.Release(60);
  b.Release(40);
  EXPECT_EQ(b.stats().reserved_bytes, 0u);
  EXPECT_EQ(b.stats().peak_reserved_bytes, 100u);
}

TEST(IngestMemoryBudget, AReservationThatDoesNotFitWaitsForARelease) {
  IngestMemoryBudget b(100);
  ASSERT_TRUE(b.Reserve(80));
  absl::Notification reserved;
  std::thread waiter([&] {
    if (b.Reserve(50)) reserved.Notify();
  });
  b.AwaitWaitingForTesting(1);
  EXPECT_FALSE(reserved.HasBeenNotified());
  EXPECT_EQ(b.stats().reserved_bytes, 80u);  // Never over the limit.
  b.Release(80);
  reserved.WaitForNotification();
  waiter.join();
  EXPECT_EQ(b.stats().reserved_bytes, 50u);
  EXPECT_EQ(b.stats().waits, 1u);
  EXPECT_EQ(b.stats().waiting, 0u);
}

// A large reservation is not overtaken by smaller ones that arrive after it.
TEST(IngestMemoryBudget, WaitersAreServedInArrivalOrder) {
  IngestMemoryBudget b(100);
  ASSERT_TRUE(b.Reserve(90));
  absl::Notification big_done;
  absl::Notification small_done;
  std::thread big([&] {
    if (b.Reserve(100)) big_done.Notify();
  });
  b.AwaitWaitingForTesting(1);
  std::thread small([&] {
    if (b.Reserve(5)) small_done.Notify();  // Would fit now, but the big one came first.
  });
  b.AwaitWaitingForTesting(2);
  EXPECT_FALSE(small_done.HasBeenNotified());
  b.Release(90);
  big_done.WaitForNotification();
  EXPECT_FALSE(small_done.HasBeenNotified());
  EXPECT_EQ(b.stats().reserved_bytes, 100u);
  b.Release(100);
  small_done.WaitForNotification();
  big.join();
  small.join();
  EXPECT_EQ(b.stats().reserved_bytes, 5u);
}

TEST(IngestMemoryBudget, CloseRefusesWaitersAndLaterReservations) {
  IngestMemoryBudget b(10);
  ASSERT_TRUE(b.Reserve(10));
  bool got = true;
  std::thread waiter([&] { got = b.Reserve(1); });
  b.AwaitWaitingForTesting(1);
  b.Close();
  waiter.join();
  EXPECT_FALSE(got);
  EXPECT_FALSE(b.Reserve(1));
  EXPECT_EQ(b.stats().reserved_bytes, 10u);
}

}  // namespace
}  // namespace tracetorch::daemon
