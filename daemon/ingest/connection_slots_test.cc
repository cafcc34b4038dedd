#include "daemon/ingest/connection_slots.h"

#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tracetorch::daemon {
namespace {

// Takes `n` slots for `uid` and greets them; their ids.
std::vector<uint64_t> Greeted(ConnectionSlots& slots, uint32_t uid, int n) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<ConnectionSlots::Admission> a = slots.Acquire(uid);
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) break;
    EXPECT_FALSE(a->evicted.has_value());
    slots.Greeted(a->id);
    ids.push_back(a->id);
  }
  return ids;
}

TEST(ConnectionSlots, OneUidCannotTakeTheSlotsOfAnother) {
  ConnectionSlots slots(/*total=*/8, /*per_uid=*/3);
  const std::vector<uint64_t> ids = Greeted(slots, 1000, 3);
  const absl::StatusOr<ConnectionSlots::Admission> s = slots.Acquire(1000);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "--max-connections-per-uid")) << s.status();
  EXPECT_TRUE(slots.Acquire(2000).ok());  // Another user still gets in.
  EXPECT_EQ(slots.open(), 4u);
  EXPECT_EQ(slots.open_for(1000), 3u);
  slots.Release(ids[0]);
  EXPECT_TRUE(slots.Acquire(1000).ok());
}

TEST(ConnectionSlots, TheTotalLimitHoldsAcrossUids) {
  ConnectionSlots slots(/*total=*/4, /*per_uid=*/3);
  std::vector<uint64_t> ids;
  for (uint32_t uid = 1; uid <= 4; ++uid) ids.push_back(Greeted(slots, uid, 1)[0]);
  const absl::StatusOr<ConnectionSlots::Admission> s = slots.Acquire(5);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "--max-connections)")) << s.status();
  slots.Release(ids[1]);
  EXPECT_EQ(slots.open_for(2), 0u);
  EXPECT_TRUE(slots.Acquire(5).ok());
}

TEST(ConnectionSlots, PerUidDefaultsToAQuarterOfTheTotal) {
  EXPECT_EQ(ConnectionSlots(512, 0).per_uid(), 128u);
  EXPECT_EQ(ConnectionSlots(2, 0).per_uid(), 1u);
  EXPECT_EQ(ConnectionSlots(4, 10).per_uid(), 4u);
}

// A uid's share full of connections that never said Hello: each newcomer of that uid takes the
// slot of the oldest of them, so the newest connection (a real agent) always gets in.
TEST(ConnectionSlots, AFullShareMakesRoomFromTheOldestConnectionWithoutAHello) {
  ConnectionSlots slots(/*total=*/16, /*per_uid=*/4);
  std::vector<uint64_t> idle;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<ConnectionSlots::Admission> a = slots.Acquire(7);
    ASSERT_TRUE(a.ok());
    EXPECT_FALSE(a->evicted.has_value());
    idle.push_back(a->id);
  }
  EXPECT_EQ(slots.waiting_for_hello(), 4u);
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<ConnectionSlots::Admission> a = slots.Acquire(7);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(a->evicted.has_value());
    EXPECT_EQ(*a->evicted, idle[static_cast<size_t>(i)]);  // Oldest first.
    slots.Release(*a->evicted);                            // Its thread's late Release: no-op.
    slots.Greeted(a->id);
    EXPECT_EQ(slots.open_for(7), 4u);
  }
  // Four greeted connections: nothing to take any more.
  EXPECT_EQ(slots.waiting_for_hello(), 0u);
  EXPECT_EQ(slots.Acquire(7).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(slots.open(), 4u);
}

// At its share, a uid takes only its own idle connections, never another uid's.
TEST(ConnectionSlots, AUidAtItsShareNeverTakesAnotherUidsSlot) {
  ConnectionSlots slots(/*total=*/16, /*per_uid=*/2);
  ASSERT_TRUE(slots.Acquire(1).ok());  // Idle, uid 1.
  Greeted(slots, 2, 2);                // uid 2 at its share, greeted.
  EXPECT_EQ(slots.Acquire(2).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(slots.open_for(1), 1u);
}

// At the total limit, the oldest idle connection of any uid makes room.
TEST(ConnectionSlots, AtTheTotalLimitTheOldestIdleConnectionOfAnyUidMakesRoom) {
  ConnectionSlots slots(/*total=*/4, /*per_uid=*/3);
  Greeted(slots, 1, 1);
  absl::StatusOr<ConnectionSlots::Admission> idle2 = slots.Acquire(2);
  absl::StatusOr<ConnectionSlots::Admission> idle3 = slots.Acquire(3);
  ASSERT_TRUE(idle2.ok() && idle3.ok());
  Greeted(slots, 1, 1);
  absl::StatusOr<ConnectionSlots::Admission> a = slots.Acquire(4);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->evicted, idle2->id);
  EXPECT_EQ(slots.open_for(2), 0u);
  EXPECT_EQ(slots.open_for(4), 1u);
  EXPECT_EQ(slots.open(), 4u);
}

TEST(ConnectionSlots, SlotsAreScarceFromThreeQuartersOfTheShareOrTheTotal) {
  ConnectionSlots slots(/*total=*/100, /*per_uid=*/4);
  std::vector<bool> scarce;
  for (int i = 0; i < 4; ++i) scarce.push_back(slots.Acquire(1)->scarce);
  EXPECT_EQ(scarce, (std::vector<bool>{false, false, true, true}));
  ConnectionSlots total(/*total=*/4, /*per_uid=*/4);
  EXPECT_FALSE(total.Acquire(1)->scarce);
  EXPECT_FALSE(total.Acquire(2)->scarce);
  EXPECT_TRUE(total.Acquire(3)->scarce);
}

}  // namespace
}  // namespace tracetorch::daemon
