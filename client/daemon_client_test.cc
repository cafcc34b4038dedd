// DaemonClient without a daemon (the daemon-backed tests live in daemon/daemon_test.cc).
#include "client/daemon_client.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tracetorch::client {
namespace {

TEST(ParseDaemonAddress, AcceptsPathsAndUnixUrls) {
  EXPECT_EQ(*ParseDaemonAddress("/run/x.sock"), "/run/x.sock");
  EXPECT_EQ(*ParseDaemonAddress("unix:///run/x.sock"), "/run/x.sock");
  EXPECT_EQ(*ParseDaemonAddress("unix:/run/x.sock"), "/run/x.sock");
  EXPECT_EQ(*ParseDaemonAddress("rel.sock"), "rel.sock");
  EXPECT_EQ(ParseDaemonAddress("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDaemonAddress("unix://").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDaemonAddress("tcp://127.0.0.1:1").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDaemonAddress("/" + std::string(200, 'a')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DefaultDaemonAddress, PrefersTheEnvironment) {
  setenv("TRACETORCH_DAEMON", "unix:///tmp/custom.sock", 1);
  EXPECT_EQ(DefaultDaemonAddress(), "unix:///tmp/custom.sock");
  unsetenv("TRACETORCH_DAEMON");
  setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
  EXPECT_EQ(DefaultDaemonAddress(), "/run/user/1000/tracetorch/tracetorchd.sock");
}

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

DaemonClientOptions NoDaemon(size_t capacity) {
  DaemonClientOptions o;
  o.address = "/tmp/tracetorch-no-daemon-here-" + std::to_string(getpid()) + ".sock";
  o.queue_capacity = capacity;
  o.initial_backoff = absl::Milliseconds(5);
  o.max_backoff = absl::Milliseconds(20);
  return o;
}

TEST(DaemonClient, CreateRejectsBadOptions) {
  DaemonClientOptions o = NoDaemon(0);
  EXPECT_EQ(DaemonClient::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = NoDaemon(8);
  o.address = "tcp://x:1";
  EXPECT_EQ(DaemonClient::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DaemonClient, FullQueueDropsAndCountsWithoutBlocking) {
  auto c = DaemonClient::Create(NoDaemon(10));
  ASSERT_TRUE(c.ok()) << c.status();
  int accepted = 0;
  const absl::Time start = absl::Now();
  for (int i = 0; i < 1000; ++i) {
    ForwardEvent e;
    e.layer_id = 0;
    e.step = static_cast<uint64_t>(i);
    accepted += (*c)->EnqueueForward(std::move(e)) ? 1 : 0;
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_EQ(accepted, 10);
  DaemonClientStats s = (*c)->stats();
  EXPECT_FALSE(s.connected);
  EXPECT_EQ(s.enqueued_events, 10u);
  EXPECT_EQ(s.dropped_events, 990u);
  EXPECT_EQ((*c)->WaitUntilConnected(absl::Milliseconds(50)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ((*c)->Flush(absl::Milliseconds(50)).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(DaemonClient, CloseIsBoundedWhenTheDaemonIsAbsent) {
  auto c = DaemonClient::Create(NoDaemon(100));
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 50; ++i) (*c)->EnqueueBackward({0, static_cast<uint64_t>(i), {}});
  const absl::Time start = absl::Now();
  absl::Status s = (*c)->Close(absl::Milliseconds(200));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(took, absl::Milliseconds(800));
  EXPECT_EQ((*c)->stats().dropped_events, 50u);  // Unsent at Close: counted.
  EXPECT_GE((*c)->stats().connect_failures, 1u);
  EXPECT_FALSE((*c)->stats().last_error.empty());
  EXPECT_EQ((*c)->Close(absl::Milliseconds(10)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE((*c)->EnqueueBackward({0, 0, {}}));
}

TEST(DaemonClient, DestructorWithoutCloseReturns) {
  auto c = DaemonClient::Create(NoDaemon(100));
  ASSERT_TRUE(c.ok());
  (*c)->EnqueueBackward({0, 0, {}});
  const absl::Time start = absl::Now();
  c->reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

}  // namespace
}  // namespace tracetorch::client
