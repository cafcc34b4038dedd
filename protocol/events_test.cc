#include "protocol/events.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tracetorch::protocol {
namespace {

TEST(CurrentProcessIdentity, ReadsRankAndJobFromTheEnvironment) {
  setenv("RANK", "3", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("WORLD_SIZE", "oops", 1);
  unsetenv("TRACETORCH_JOB");
  setenv("TORCHELASTIC_RUN_ID", "elastic-7", 1);
  ProcessIdentity id = CurrentProcessIdentity();
  EXPECT_EQ(id.pid, getpid());
  EXPECT_FALSE(id.host.empty());
  EXPECT_GT(id.start_time_unix_ns, 0);
  EXPECT_LE(id.start_time_unix_ns, absl::GetCurrentTimeNanos());
  EXPECT_EQ(id.rank, 3);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_FALSE(id.world_size.has_value());
  EXPECT_EQ(id.job_id, "elastic-7");
  setenv("TRACETORCH_JOB", "mine", 1);
  EXPECT_EQ(CurrentProcessIdentity().job_id, "mine");
  for (const char* v :
       {"RANK", "LOCAL_RANK", "WORLD_SIZE", "TRACETORCH_JOB", "TORCHELASTIC_RUN_ID"}) {
    unsetenv(v);
  }
}

}  // namespace
}  // namespace tracetorch::protocol
