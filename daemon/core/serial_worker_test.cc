#include "daemon/core/serial_worker.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"

namespace tracetorch::daemon {
namespace {

TEST(SerialWorker, RunsTasksInOrderOnItsOwnThread) {
  SerialWorker worker;
  absl::Mutex mu;
  std::vector<int> order;
  std::thread::id ran_on;
  absl::Notification done;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(worker.Post([&, i] {
      absl::MutexLock lock(&mu);
      order.push_back(i);
      ran_on = std::this_thread::get_id();
    }));
  }
  ASSERT_TRUE(worker.Post([&] { done.Notify(); }));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::MutexLock lock(&mu);
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(SerialWorker, StopWaitsForTheRunningTaskAndDropsTheQueuedOnes) {
  auto worker = std::make_unique<SerialWorker>();
  absl::Notification running;
  absl::Notification release;
  std::atomic<bool> finished{false};
  ASSERT_TRUE(worker->Post([&] {
    running.Notify();
    release.WaitForNotification();
    finished = true;
  }));
  ASSERT_TRUE(running.WaitForNotificationWithTimeout(absl::Seconds(10)));
  std::atomic<int> ran{0};
  auto witness = std::make_shared<int>(0);  // Held by every queued task.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(worker->Post([&ran, witness] { ++ran; }));
  }
  std::thread stopper([&] { worker->Stop(); });
  // Stop has begun once posting is refused (the task refused is dropped at once).
  ASSERT_TRUE(test_util::WaitFor([&] { return !worker->Post([&ran] { ++ran; }); }));
  EXPECT_FALSE(finished.load());  // Stop is waiting for it.
  release.Notify();
  stopper.join();
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(witness.use_count(), 1);  // The queued tasks were destroyed, not leaked.
  worker->Stop();                     // Idempotent.
  EXPECT_FALSE(worker->Post([] {}));
  worker.reset();
}

}  // namespace
}  // namespace tracetorch::daemon
