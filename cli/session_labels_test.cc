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

}  // namespace
}  // namespace tracetorch::cli
