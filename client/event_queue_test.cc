#include "client/event_queue.h"

#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "protocol/wire.h"

namespace tracetorch::client {
namespace {

namespace wire = protocol::wire;

protocol::ForwardEvent Forward(uint32_t layer, uint64_t step) {
  protocol::ForwardEvent e;
  e.layer_id = layer;
  e.step = step;
  e.latency_ms = 0.5;
  e.outputs.emplace_back();
  e.outputs[0].shape = {4, 8};
  return e;
}

protocol::BackwardEvent Backward(uint32_t layer, uint64_t step) {
  protocol::BackwardEvent e{layer, step, {}};
  e.sample.grad_norm = 1.5;
  return e;
}

// A deadline no test reaches: a lost wakeup hangs the test until ctest's timeout fails it.
absl::Time Far() { return absl::Now() + absl::Hours(1); }

TEST(EventQueue, TakesEncodedEventsInOrder) {
  EventQueue q(100, 1 << 20, 100);
  ASSERT_TRUE(q.PushForward(Forward(1, 2)));
  ASSERT_TRUE(q.PushBackward(Backward(1, 2)));
  ASSERT_TRUE(q.PushForward(Forward(2, 3)));
  std::string expected;
  wire::AppendForwardEventField(Forward(1, 2), &expected);
  wire::AppendBackwardEventField(Backward(1, 2), &expected);
  wire::AppendForwardEventField(Forward(2, 3), &expected);
  EXPECT_EQ(q.size(), 3u);
  std::string taken = "stale";
  EXPECT_EQ(q.Take(absl::Now(), &taken), 3u);
  EXPECT_EQ(taken, expected);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.Take(absl::Now(), &taken), 0u);  // Nothing queued: the deadline ends the wait.
  EXPECT_TRUE(taken.empty());
  EXPECT_EQ(q.accepted(), 3u);
  EXPECT_EQ(q.dropped(), 0u);
}

TEST(EventQueue, FullQueueRefusesAndCounts) {
  EventQueue q(2, 1 << 20, 100);
  EXPECT_TRUE(q.PushBackward(Backward(0, 0)));
  EXPECT_TRUE(q.PushBackward(Backward(0, 1)));
  EXPECT_FALSE(q.PushBackward(Backward(0, 2)));
  EXPECT_FALSE(q.PushForward(Forward(0, 2)));
  EXPECT_EQ(q.accepted(), 2u);
  EXPECT_EQ(q.dropped(), 2u);
  std::string taken;
  EXPECT_EQ(q.Take(absl::Now(), &taken), 2u);
  EXPECT_TRUE(q.PushBackward(Backward(0, 3)));  // Room again.
}

TEST(EventQueue, RefusesAnEventThatFitsNoFrame) {
  EventQueue q(100, 1024, 100);
  protocol::ForwardEvent big = Forward(0, 0);
  big.outputs[0].shape.assign(500, 1 << 20);
  EXPECT_FALSE(q.PushForward(big));
  EXPECT_EQ(q.dropped(), 1u);
  EXPECT_TRUE(q.PushBackward(Backward(0, 0)));
  std::string taken, expected;
  wire::AppendBackwardEventField(Backward(0, 0), &expected);
  EXPECT_EQ(q.Take(absl::Now(), &taken), 1u);
  EXPECT_EQ(taken, expected);  // Nothing of the refused event is left.
}

// A full batch wakes a waiting Take.
TEST(EventQueue, ABatchWakesTheTaker) {
  EventQueue q(100, 1 << 20, 3);
  uint64_t got = 0;
  std::thread taker([&] {
    std::string taken;
    got = q.Take(Far(), &taken);
  });
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(q.PushBackward(Backward(0, i)));
  taker.join();
  EXPECT_EQ(got, 3u);  // Woken by the third (or never waited: all three were there).
}

// Wake() ends the current or the next wait at once, once.
TEST(EventQueue, WakeEndsTheNextWait) {
  EventQueue q(100, 1 << 20, 100);
  ASSERT_TRUE(q.PushBackward(Backward(0, 0)));
  q.Wake();
  std::string taken;
  EXPECT_EQ(q.Take(Far(), &taken), 1u);
  EXPECT_EQ(q.Take(absl::Now() + absl::Milliseconds(1), &taken), 0u);  // Not woken again.
}

TEST(EventQueue, RefuseEndsWaitsAndRefusesPushes) {
  EventQueue q(100, 1 << 20, 100);
  ASSERT_TRUE(q.PushBackward(Backward(0, 0)));
  std::thread taker([&] {
    std::string taken;
    std::string unused;
    (void)q.Take(Far(), &taken);
    (void)q.Take(Far(), &unused);  // Refusing: no wait.
  });
  q.Refuse();
  taker.join();
  EXPECT_FALSE(q.PushBackward(Backward(0, 1)));
  EXPECT_EQ(q.dropped(), 1u);
  EXPECT_EQ(q.accepted(), 1u);
}

TEST(EventQueue, ClearReturnsWhatItDropped) {
  EventQueue q(100, 1 << 20, 100);
  ASSERT_TRUE(q.PushBackward(Backward(0, 0)));
  ASSERT_TRUE(q.PushForward(Forward(0, 0)));
  EXPECT_EQ(q.Clear(), 2u);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.dropped(), 0u);  // The caller counts it.
  std::string taken;
  EXPECT_EQ(q.Take(absl::Now(), &taken), 0u);
  EXPECT_TRUE(taken.empty());
}

}  // namespace
}  // namespace tracetorch::client
