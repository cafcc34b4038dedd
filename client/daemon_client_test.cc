// DaemonClient without a daemon (the daemon-backed tests live in daemon/server/daemon_test.cc).
#include "client/daemon_client.h"

#include <unistd.h>

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch::client {
namespace {

using ::testing::HasSubstr;

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

// Enqueue never waits for the sender: with no daemon to send to, the eleventh event is dropped
// and counted instead of waiting for room.
TEST(DaemonClient, FullQueueDropsAndCounts) {
  auto c = DaemonClient::Create(NoDaemon(10));
  ASSERT_TRUE(c.ok()) << c.status();
  int accepted = 0;
  for (int i = 0; i < 1000; ++i) {
    protocol::ForwardEvent e;
    e.layer_id = 0;
    e.step = static_cast<uint64_t>(i);
    accepted += (*c)->EnqueueForward(std::move(e)) ? 1 : 0;
  }
  EXPECT_EQ(accepted, 10);
  DaemonClientStats s = (*c)->stats();
  EXPECT_FALSE(s.connected);
  EXPECT_EQ(s.enqueued_events, 10u);
  EXPECT_EQ(s.dropped_events, 990u);
  EXPECT_EQ((*c)->WaitUntilConnected(absl::Milliseconds(50)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ((*c)->Flush(absl::Milliseconds(50)).code(), absl::StatusCode::kDeadlineExceeded);
}

// The daemon never appears: Close() gives up when its wait is over (it returns at all, and says
// so), counting what it could not send.
TEST(DaemonClient, CloseGivesUpWhenTheDaemonIsAbsent) {
  auto c = DaemonClient::Create(NoDaemon(100));
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 50; ++i) (*c)->EnqueueBackward({0, static_cast<uint64_t>(i), {}});
  absl::Status s = (*c)->Close(absl::Milliseconds(200));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("50 queued events dropped"));
  EXPECT_EQ((*c)->stats().dropped_events, 50u);  // Unsent at Close: counted.
  EXPECT_GE((*c)->stats().connect_failures, 1u);
  EXPECT_FALSE((*c)->stats().last_error.empty());
  EXPECT_EQ((*c)->Close(absl::Milliseconds(10)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE((*c)->EnqueueBackward({0, 0, {}}));
}

// The destructor closes (with its one-second wait) and joins the sender: it returns although
// the daemon never answers and an event is still queued. (A destructor that hangs fails the test
// by its timeout.)
TEST(DaemonClient, DestructorWithoutCloseReturns) {
  auto c = DaemonClient::Create(NoDaemon(100));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->EnqueueBackward({0, 0, {}}));
  c->reset();
}

}  // namespace
}  // namespace tracetorch::client
