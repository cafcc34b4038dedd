#include "client/replay_buffer.h"

#include <string>

#include "gtest/gtest.h"

namespace tracetorch::client {
namespace {

TEST(ReplayBuffer, KeepsFramesUntilAcknowledgedOldestFirst) {
  ReplayBuffer r(100, 1 << 20);
  EXPECT_EQ(r.FirstEvent(0), 0u);
  EXPECT_EQ(r.Add(1, 0, 10, "aa"), 0u);
  EXPECT_EQ(r.Add(2, 10, 0, "g"), 0u);  // A batch without events (an op graph) is kept too.
  EXPECT_EQ(r.Add(3, 10, 5, "bbb"), 0u);
  EXPECT_EQ(r.events(), 15u);
  EXPECT_EQ(r.bytes(), 6u);
  EXPECT_EQ(r.FirstEvent(15), 0u);
  std::string out = "x";
  EXPECT_EQ(r.AppendAll(&out), 15u);
  EXPECT_EQ(out, "xaagbbb");
  r.Acknowledge(2);
  EXPECT_EQ(r.FirstEvent(15), 10u);
  EXPECT_EQ(r.events(), 5u);
  r.Acknowledge(1);  // Older than what is held: nothing changes.
  EXPECT_EQ(r.events(), 5u);
  r.Acknowledge(3);
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.FirstEvent(15), 15u);
  EXPECT_EQ(r.bytes(), 0u);
}

TEST(ReplayBuffer, EvictsTheOldestBeyondEitherBoundAndCountsTheirEvents) {
  ReplayBuffer by_events(10, 1 << 20);
  EXPECT_EQ(by_events.Add(1, 0, 6, "a"), 0u);
  EXPECT_EQ(by_events.Add(2, 6, 6, "b"), 6u);  // 12 > 10: the first frame goes.
  EXPECT_EQ(by_events.FirstEvent(12), 6u);
  EXPECT_EQ(by_events.Add(3, 12, 20, "c"), 26u);  // Alone over the bound: nothing stays.
  EXPECT_TRUE(by_events.empty());

  ReplayBuffer by_bytes(1000, 4);
  EXPECT_EQ(by_bytes.Add(1, 0, 1, "aaa"), 0u);
  EXPECT_EQ(by_bytes.Add(2, 1, 2, "bb"), 1u);
  EXPECT_EQ(by_bytes.bytes(), 2u);
  EXPECT_EQ(by_bytes.events(), 2u);
}

TEST(ReplayBuffer, ABoundOfZeroKeepsNothing) {
  ReplayBuffer off(0, 1 << 20);
  EXPECT_EQ(off.Add(1, 0, 3, "abc"), 3u);
  EXPECT_TRUE(off.empty());
  EXPECT_EQ(off.FirstEvent(3), 3u);
  off.Add(2, 3, 1, "d");
  off.Clear();
  EXPECT_EQ(off.events(), 0u);
}

}  // namespace
}  // namespace tracetorch::client
