#include "cli/session_labels.h"

#include "gtest/gtest.h"

namespace tracetorch::cli {
namespace {

TEST(SessionStateName, EveryStateAndAnUnknownOne) {
  EXPECT_EQ(SessionStateName(v1::SESSION_STATE_LIVE), "live");
  EXPECT_EQ(SessionStateName(v1::SESSION_STATE_FINISHED), "finished");
  EXPECT_EQ(SessionStateName(v1::SESSION_STATE_ABORTED), "aborted");
  EXPECT_EQ(SessionStateName(v1::SESSION_STATE_UNSPECIFIED), "unknown");
  EXPECT_EQ(SessionStateName(static_cast<v1::SessionState>(42)), "unknown");  // A newer daemon's.
}

TEST(SessionStateName, AStalledLiveSessionIsStalled) {
  v1::SessionInfo info;
  info.set_state(v1::SESSION_STATE_LIVE);
  EXPECT_EQ(SessionStateName(info), "live");
  info.mutable_flight()->set_stalled(true);
  EXPECT_EQ(SessionStateName(info), "stalled");
  info.set_state(v1::SESSION_STATE_ABORTED);  // Ended: its last state, not a stall.
  EXPECT_EQ(SessionStateName(info), "aborted");
}

TEST(FlightText, PositionHowLongAndTheExit) {
  v1::SessionInfo info;
  EXPECT_EQ(FlightText(info, 0), "");
  v1::FlightStatus* f = info.mutable_flight();
  f->set_position("step 1042, backward, in encoder.layers.5.attn");
  f->set_moved_unix_ns(1'000'000'000);
  EXPECT_EQ(FlightText(info, 44'000'000'000), "step 1042, backward, in encoder.layers.5.attn");
  f->set_stalled(true);
  EXPECT_EQ(FlightText(info, 44'000'000'000),
            "step 1042, backward, in encoder.layers.5.attn, for 43 s");
  f->set_stalled(false);
  f->mutable_exit()->set_description("killed by SIGSEGV");
  EXPECT_EQ(FlightText(info, 0),
            "step 1042, backward, in encoder.layers.5.attn; killed by SIGSEGV");
}

}  // namespace
}  // namespace tracetorch::cli
