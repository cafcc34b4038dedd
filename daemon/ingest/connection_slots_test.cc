#include "daemon/ingest/connection_slots.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tracetorch::daemon {
namespace {

TEST(ConnectionSlots, OneUidCannotTakeTheSlotsOfAnother) {
  ConnectionSlots slots(/*total=*/8, /*per_uid=*/3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(slots.Acquire(1000).ok());
  const absl::Status s = slots.Acquire(1000);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(s.message(), "--max-connections-per-uid")) << s;
  EXPECT_TRUE(slots.Acquire(2000).ok());  // Another user still gets in.
  EXPECT_EQ(slots.open(), 4u);
  EXPECT_EQ(slots.open_for(1000), 3u);
  slots.Release(1000);
  EXPECT_TRUE(slots.Acquire(1000).ok());
}

TEST(ConnectionSlots, TheTotalLimitHoldsAcrossUids) {
  ConnectionSlots slots(/*total=*/4, /*per_uid=*/3);
  ASSERT_TRUE(slots.Acquire(1).ok());
  ASSERT_TRUE(slots.Acquire(2).ok());
  ASSERT_TRUE(slots.Acquire(3).ok());
  ASSERT_TRUE(slots.Acquire(4).ok());
  const absl::Status s = slots.Acquire(5);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(s.message(), "--max-connections)")) << s;
  slots.Release(2);
  EXPECT_EQ(slots.open_for(2), 0u);
  EXPECT_TRUE(slots.Acquire(5).ok());
}

TEST(ConnectionSlots, PerUidDefaultsToAQuarterOfTheTotal) {
  EXPECT_EQ(ConnectionSlots(512, 0).per_uid(), 128u);
  EXPECT_EQ(ConnectionSlots(2, 0).per_uid(), 1u);
  EXPECT_EQ(ConnectionSlots(4, 10).per_uid(), 4u);
}

}  // namespace
}  // namespace tracetorch::daemon
