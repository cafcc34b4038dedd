#include "daemon/core/worker_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"

namespace tracetorch::daemon {
namespace {

using test_util::WaitFor;

TEST(WorkerPool, RunsTasksConcurrentlyOnItsThreads) {
  WorkerPool pool(WorkerPoolOptions{.threads = 3});
  // Three tasks that each wait for the other two: they can only all finish if they run at once.
  absl::Mutex mu;
  int arrived = 0;
  std::atomic<int> finished{0};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(pool.Post([&](bool cancelled) {
                      ASSERT_FALSE(cancelled);
                      absl::MutexLock lock(&mu);
                      ++arrived;
                      auto all = [&] { return arrived == 3; };
                      mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(30));
                      if (arrived == 3) finished.fetch_add(1);
                    })
                    .ok());
  }
  ASSERT_TRUE(WaitFor([&] { return finished.load() == 3; }, absl::Seconds(30)));
}

TEST(WorkerPool, ABoundedQueueRefusesTheTaskOverItsBound) {
  WorkerPool pool(WorkerPoolOptions{.threads = 1, .max_queued = 2});
  absl::Notification running;
  absl::Notification release;
  ASSERT_TRUE(pool.Post([&](bool) {
                    running.Notify();
                    release.WaitForNotification();
                  })
                  .ok());
  running.WaitForNotification();  // The thread is busy: what follows waits in the queue.
  std::vector<int> order;
  absl::Mutex mu;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pool.Post([&, i](bool cancelled) {
                      absl::MutexLock lock(&mu);
                      order.push_back(cancelled ? -1 : i);
                    })
                    .ok());
  }
  EXPECT_EQ(pool.queued(), 2u);
  EXPECT_EQ(pool.running(), 1u);
  const absl::Status full = pool.Post([](bool) { ADD_FAILURE() << "a refused task ran"; });
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(), "2 tasks are already waiting for 1 thread");
  release.Notify();
  ASSERT_TRUE(WaitFor([&] { return pool.queued() == 0 && pool.running() == 0; }));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
}

TEST(WorkerPool, StopCancelsTheQueuedTasksAndWaitsForTheRunningOne) {
  WorkerPool pool(WorkerPoolOptions{.threads = 1});
  absl::Notification running;
  absl::Notification release;
  std::atomic<bool> first_done{false};
  ASSERT_TRUE(pool.Post([&](bool) {
                    running.Notify();
                    release.WaitForNotification();
                    first_done = true;
                  })
                  .ok());
  running.WaitForNotification();
  std::vector<bool> cancelled;  // Written by the stopper thread only, read after it is joined.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(pool.Post([&](bool c) { cancelled.push_back(c); }).ok());
  }
  std::thread stopper([&] { pool.Stop(); });
  // Stop calls the queued tasks first (cancelled), then waits for the running one.
  ASSERT_TRUE(WaitFor([&] { return pool.queued() == 0; }));
  release.Notify();
  stopper.join();
  EXPECT_TRUE(first_done);
  EXPECT_EQ(cancelled, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(pool.Post([](bool) {}).code(), absl::StatusCode::kFailedPrecondition);
  pool.Stop();  // Idempotent.
}

}  // namespace
}  // namespace tracetorch::daemon
