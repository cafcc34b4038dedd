#include "agent/pending_results.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tracetorch::agent {
namespace {

// A completion the test finishes by hand (the fake device).
class ManualCompletion final : public Completion {
 public:
  explicit ManualCompletion(std::shared_ptr<absl::Notification> done) : done_(std::move(done)) {}
  bool Done() override { return done_->HasBeenNotified(); }
  bool WaitUntil(absl::Time deadline) override {
    return done_->WaitForNotificationWithDeadline(deadline);
  }

 private:
  std::shared_ptr<absl::Notification> done_;
};

// Counts Done() calls and finishes on the n-th one: the default WaitUntil polls it.
class FinishesAfterPolls final : public Completion {
 public:
  explicit FinishesAfterPolls(int polls) : polls_(polls) {}
  bool Done() override { return ++calls_ >= polls_; }

 private:
  const int polls_;
  int calls_ = 0;
};

// Never finishes (a device that hangs).
class NeverCompletion final : public Completion {
 public:
  bool Done() override { return false; }
};

TEST(PendingResultsTest, ReadyResultsLeaveInPushOrder) {
  PendingResults<int> pending;
  EXPECT_TRUE(pending.TakeCompleted().empty());
  for (int i = 0; i < 3; ++i) pending.Push(std::make_unique<ReadyCompletion>(), i);
  EXPECT_EQ(pending.in_flight(), 3);
  EXPECT_EQ(pending.TakeCompleted(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(pending.in_flight(), 0);
  EXPECT_TRUE(pending.TakeCompleted().empty());
}

TEST(PendingResultsTest, UncountedMarkersKeepTheirPlaceButAreNotInFlight) {
  PendingResults<int> pending;
  pending.Push(std::make_unique<ReadyCompletion>(), 0, /*counted=*/false);
  pending.Push(std::make_unique<NeverCompletion>(), 1);
  pending.Push(std::make_unique<NeverCompletion>(), 2, /*counted=*/false);
  pending.Push(std::make_unique<ReadyCompletion>(), 3);
  EXPECT_EQ(pending.in_flight(), 2);
  EXPECT_EQ(pending.queued(), 4);
  EXPECT_EQ(pending.TakeCompleted(), (std::vector<int>{0}));  // 1 holds back 2 and 3.
  EXPECT_EQ(pending.in_flight(), 2);
  EXPECT_EQ(pending.queued(), 3);
  int64_t abandoned = 0;
  EXPECT_EQ(pending.TakeAll(absl::Now(), &abandoned), (std::vector<int>{3}));
  EXPECT_EQ(abandoned, 1);  // The marker 2 is dropped too, but not counted.
  EXPECT_EQ(pending.in_flight(), 0);
  EXPECT_EQ(pending.queued(), 0);
  pending.Push(std::make_unique<NeverCompletion>(), 4, /*counted=*/false);
  pending.Push(std::make_unique<NeverCompletion>(), 5);
  pending.Clear();
  EXPECT_EQ(pending.in_flight(), 0);
  EXPECT_EQ(pending.queued(), 0);
}

TEST(PendingResultsTest, UnfinishedWorkHoldsBackLaterResults) {
  PendingResults<std::string> pending;
  auto first = std::make_shared<absl::Notification>();
  pending.Push(std::make_unique<ManualCompletion>(first), "first");
  pending.Push(std::make_unique<ReadyCompletion>(), "second");
  EXPECT_TRUE(pending.TakeCompleted().empty());
  EXPECT_EQ(pending.in_flight(), 2);
  first->Notify();
  EXPECT_EQ(pending.TakeCompleted(), (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(pending.in_flight(), 0);
}

TEST(PendingResultsTest, TakeAllWaitsForWorkThatFinishesWhileWaiting) {
  PendingResults<int> pending;
  auto done = std::make_shared<absl::Notification>();
  pending.Push(std::make_unique<ManualCompletion>(done), 7);
  pending.Push(std::make_unique<FinishesAfterPolls>(3), 8);  // The default WaitUntil polls.
  std::thread device([&] { done->Notify(); });
  int64_t abandoned = 0;
  EXPECT_EQ(pending.TakeAll(absl::InfiniteFuture(), &abandoned), (std::vector<int>{7, 8}));
  device.join();
  EXPECT_EQ(abandoned, 0);
  EXPECT_EQ(pending.in_flight(), 0);
}

TEST(PendingResultsTest, TakeAllDropsAndCountsWhatMissesTheDeadline) {
  PendingResults<int> pending;
  pending.Push(std::make_unique<ReadyCompletion>(), 1);
  pending.Push(std::make_unique<NeverCompletion>(), 2);
  pending.Push(std::make_unique<ReadyCompletion>(), 3);  // Done: kept although behind a hang.
  int64_t abandoned = 0;
  // A deadline already past: nothing waits, what has finished is kept.
  EXPECT_EQ(pending.TakeAll(absl::Now() - absl::Seconds(1), &abandoned), (std::vector<int>{1, 3}));
  EXPECT_EQ(abandoned, 1);
  EXPECT_EQ(pending.in_flight(), 0);
}

TEST(PendingResultsTest, PushDuringTakeAllIsKeptForLater) {
  PendingResults<int> pending;
  auto done = std::make_shared<absl::Notification>();
  auto waiting = std::make_shared<absl::Notification>();
  // Finishes only after the test has pushed more while TakeAll waits on it.
  class SignalThenWait final : public Completion {
   public:
    SignalThenWait(std::shared_ptr<absl::Notification> waiting,
                   std::shared_ptr<absl::Notification> done)
        : waiting_(std::move(waiting)), done_(std::move(done)) {}
    bool Done() override { return done_->HasBeenNotified(); }
    bool WaitUntil(absl::Time deadline) override {
      waiting_->Notify();
      return done_->WaitForNotificationWithDeadline(deadline);
    }

   private:
    std::shared_ptr<absl::Notification> waiting_, done_;
  };
  pending.Push(std::make_unique<SignalThenWait>(waiting, done), 1);
  std::vector<int> taken;
  std::thread stopper([&] { taken = pending.TakeAll(absl::InfiniteFuture(), nullptr); });
  waiting->WaitForNotification();
  pending.Push(std::make_unique<ReadyCompletion>(), 2);  // Not blocked by the waiting TakeAll.
  EXPECT_EQ(pending.in_flight(), 2);
  done->Notify();
  stopper.join();
  EXPECT_EQ(taken, (std::vector<int>{1}));
  EXPECT_EQ(pending.in_flight(), 1);
  EXPECT_EQ(pending.TakeCompleted(), (std::vector<int>{2}));
}

TEST(PendingResultsTest, ClearDropsEverything) {
  PendingResults<int> pending;
  pending.Push(std::make_unique<NeverCompletion>(), 1);
  pending.Push(std::make_unique<ReadyCompletion>(), 2);
  pending.Clear();
  EXPECT_EQ(pending.in_flight(), 0);
  EXPECT_TRUE(pending.TakeCompleted().empty());
}

}  // namespace
}  // namespace tracetorch::agent
