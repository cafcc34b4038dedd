// DaemonClient without a daemon, and against a fake one that records the bytes it receives (the
// tests against the real daemon live in daemon/server/daemon_test.cc).
#include "client/daemon_client.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protocol/frame_decoder.h"
#include "protocol/wire.h"

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

namespace wire = protocol::wire;

// A daemon that answers the first connection's Hello with a Welcome and keeps every byte it
// receives until the client closes; Join() returns them.
class FakeDaemon {
 public:
  FakeDaemon() {
    dir_ = "/tmp/ttclient_test_XXXXXX";
    EXPECT_NE(mkdtemp(dir_.data()), nullptr);
    path_ = dir_ + "/d.sock";
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path_.data(), path_.size());
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listen_fd_, 1), 0);
    thread_ = std::thread([this] {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      // DaemonMessage{welcome{session_id: "s"}}.
      const char welcome[] = {5, 0, 0, 0, 0x0a, 3, 0x0a, 1, 's'};
      EXPECT_EQ(write(fd, welcome, sizeof(welcome)), static_cast<ssize_t>(sizeof(welcome)));
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) received_.append(buf, static_cast<size_t>(n));
      close(fd);
    });
  }
  ~FakeDaemon() {
    Join();
    close(listen_fd_);
    std::filesystem::remove_all(dir_);
  }
  const std::string& path() const { return path_; }
  // After the client closed: the payloads of the frames received, in order.
  std::vector<std::string> Join() {
    if (thread_.joinable()) thread_.join();
    std::vector<std::string> frames;
    std::string_view in(received_);
    while (in.size() >= wire::kFrameHeaderBytes) {
      const uint32_t n = wire::GetFrameHeader(in.data());
      EXPECT_GE(in.size(), wire::kFrameHeaderBytes + n);
      frames.emplace_back(in.substr(wire::kFrameHeaderBytes, n));
      in.remove_prefix(std::min(in.size(), wire::kFrameHeaderBytes + n));
    }
    EXPECT_TRUE(in.empty());
    return frames;
  }

 private:
  std::string dir_, path_;
  int listen_fd_ = -1;
  std::thread thread_;
  std::string received_;
};

// Records the events of the batches it is shown, as "f<layer>.<step>" / "b<layer>.<step>".
class Events : public wire::EventBatchVisitor {
 public:
  void OnForward(const wire::ForwardFields& e) override {
    seen.push_back("f" + std::to_string(e.layer_id) + "." + std::to_string(e.step));
    EXPECT_EQ(e.inputs, 1);
    EXPECT_EQ(e.first_output_std, std::nullopt);
  }
  void OnBackward(const protocol::BackwardEvent& e) override {
    seen.push_back("b" + std::to_string(e.layer_id) + "." + std::to_string(e.step));
    EXPECT_EQ(e.sample.grad_norm, 0.25);
  }
  std::vector<std::string> seen;
};

// The EventBatch inside an AgentMessage frame payload (field 3), or nullopt for another message.
std::optional<std::string_view> BatchOf(std::string_view payload) {
  if (payload.empty() || payload[0] != 0x1a) return std::nullopt;
  size_t i = 1;
  while (i < payload.size() && (static_cast<uint8_t>(payload[i]) & 0x80) != 0) ++i;
  return payload.substr(i + 1);
}

// Events reach the daemon in the order they were queued, forward and backward interleaved, in
// batches of at most max_batch_events with increasing sequence numbers.
TEST(DaemonClient, SendsEventsInOrderInBoundedBatches) {
  FakeDaemon daemon;
  DaemonClientOptions o;
  o.address = daemon.path();
  o.max_batch_events = 7;
  auto c = DaemonClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->DeclareLayers({{0, {"a", "Linear", "a", 1, 1}}, {1, {"b", "Linear", "b", 1, 1}}});
  std::vector<std::string> expected;
  for (uint64_t step = 0; step < 10; ++step) {
    for (uint32_t l = 0; l < 2; ++l) {
      protocol::ForwardEvent f;
      f.layer_id = l;
      f.step = step;
      f.inputs.emplace_back();
      ASSERT_TRUE((*c)->EnqueueForward(std::move(f)));
      expected.push_back("f" + std::to_string(l) + "." + std::to_string(step));
    }
    for (uint32_t l = 2; l-- > 0;) {
      protocol::BackwardEvent b{l, step, {}};
      b.sample.grad_norm = 0.25;
      ASSERT_TRUE((*c)->EnqueueBackward(b));
      expected.push_back("b" + std::to_string(l) + "." + std::to_string(step));
    }
  }
  ASSERT_TRUE((*c)->Flush(absl::Seconds(10)).ok());
  ASSERT_TRUE((*c)->Close(absl::Seconds(10)).ok());
  EXPECT_EQ((*c)->stats().sent_events, 40u);
  EXPECT_EQ((*c)->stats().dropped_events, 0u);

  Events events;
  uint64_t last_sequence = 0;
  int batches = 0;
  for (const std::string& payload : daemon.Join()) {
    std::optional<std::string_view> batch = BatchOf(payload);
    if (!batch.has_value()) continue;
    const size_t before = events.seen.size();
    absl::StatusOr<wire::EventBatchSummary> r = wire::DecodeEventBatch(*batch, &events);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_LE(events.seen.size() - before, 7u);
    EXPECT_GT(r->sequence, last_sequence);
    last_sequence = r->sequence;
    ++batches;
  }
  EXPECT_GE(batches, 6);  // 40 events, 7 at most per batch.
  EXPECT_EQ(events.seen, expected);
}

// An event that cannot fit in any frame is refused at once and counted; the next one goes out.
TEST(DaemonClient, RefusesAnEventLargerThanAFrame) {
  FakeDaemon daemon;
  DaemonClientOptions o;
  o.address = daemon.path();
  o.max_frame_bytes = 1024;
  auto c = DaemonClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->DeclareLayers({{0, {"a", "Linear", "a", 1, 1}}});
  protocol::ForwardEvent big;
  big.inputs.emplace_back();
  big.inputs[0].shape.assign(500, 1 << 20);  // 2 KiB of dimensions.
  EXPECT_FALSE((*c)->EnqueueForward(big));
  protocol::BackwardEvent small{0, 1, {}};
  small.sample.grad_norm = 0.25;
  EXPECT_TRUE((*c)->EnqueueBackward(small));
  ASSERT_TRUE((*c)->Close(absl::Seconds(10)).ok());
  const DaemonClientStats s = (*c)->stats();
  EXPECT_EQ(s.enqueued_events, 1u);
  EXPECT_EQ(s.dropped_events, 1u);
  EXPECT_EQ(s.sent_events, 1u);
  Events events;
  for (const std::string& payload : daemon.Join()) {
    if (std::optional<std::string_view> batch = BatchOf(payload)) {
      ASSERT_TRUE(wire::DecodeEventBatch(*batch, &events).ok());
    }
  }
  EXPECT_EQ(events.seen, std::vector<std::string>{"b0.1"});
}

}  // namespace
}  // namespace tracetorch::client
