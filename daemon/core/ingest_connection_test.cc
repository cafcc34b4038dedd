#include "daemon/core/ingest_connection.h"

#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"
#include "protocol/wire.h"
#include "trace/json.h"
#include "tracetorch/v1/agent.pb.h"

namespace tracetorch::daemon {
namespace {

// Parses the DaemonMessage frames a connection appended.
std::vector<v1::DaemonMessage> Replies(const std::string& out) {
  std::vector<v1::DaemonMessage> r;
  std::string_view rest(out);
  while (rest.size() >= 4) {
    const uint32_t len = protocol::wire::GetFrameHeader(rest.data());
    v1::DaemonMessage m;
    EXPECT_TRUE(m.ParseFromArray(rest.data() + 4, static_cast<int>(len)));
    r.push_back(m);
    rest.remove_prefix(4 + len);
  }
  return r;
}

std::string Payload(const v1::AgentMessage& m) { return m.SerializeAsString(); }

v1::AgentMessage Hello() {
  v1::AgentMessage m;
  m.mutable_hello()->set_protocol_version(v1::PROTOCOL_VERSION_1);
  m.mutable_hello()->mutable_identity()->set_pid(3);
  return m;
}

class IngestConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = SessionManager::Create({}, &counters_);
    ASSERT_TRUE(m.ok());
    manager_ = *std::move(m);
  }
  DaemonCounters counters_;
  RateLimitedLog log_;
  std::unique_ptr<SessionManager> manager_;
};

TEST_F(IngestConnectionTest, HelloGetsWelcomeThenEventsFlow) {
  IngestConnection c(manager_.get(), &counters_, &log_, {3, 0, 0}, 1 << 20);
  std::string out;
  ASSERT_TRUE(c.OnFrame(Payload(Hello()), &out));
  auto r = Replies(out);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_TRUE(r[0].has_welcome());
  EXPECT_EQ(r[0].welcome().session_id(), c.session_id());
  out.clear();
  v1::AgentMessage table;
  table.mutable_layer_table()->add_layers()->set_full_name("fc");
  ASSERT_TRUE(c.OnFrame(Payload(table), &out));
  v1::AgentMessage ev;
  ev.mutable_events()->add_forward()->set_layer_id(0);
  ev.mutable_events()->add_forward()->set_layer_id(5);  // Undeclared.
  ev.mutable_events()->add_forward()->set_layer_id(6);  // Undeclared.
  ASSERT_TRUE(c.OnFrame(Payload(ev), &out));
  ASSERT_TRUE(c.OnFrame(Payload(ev), &out));
  r = Replies(out);
  ASSERT_EQ(r.size(), 1u);  // One non-fatal error per connection.
  EXPECT_FALSE(r[0].error().fatal());
  EXPECT_EQ(r[0].error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(counters_.events_total.load(), 2u);
  EXPECT_EQ(counters_.rejected_events.load(), 4u);
  v1::AgentMessage end;
  end.mutable_end();
  ASSERT_TRUE(c.OnFrame(Payload(end), &out));
  c.OnClosed(false);
  EXPECT_EQ(manager_->List()[0].state, SessionState::kFinished);
}

TEST_F(IngestConnectionTest, OversizedAndEmptyFramesAreFatal) {
  IngestConnection c(manager_.get(), &counters_, &log_, {}, 1024);
  std::string out;
  EXPECT_TRUE(c.OnFrameHeader(1024, &out));
  EXPECT_FALSE(c.OnFrameHeader(1025, &out));
  auto r = Replies(out);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error().fatal());
  EXPECT_EQ(r[0].error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  IngestConnection d(manager_.get(), &counters_, &log_, {}, 1024);
  EXPECT_FALSE(d.OnFrameHeader(0, &out));
  EXPECT_EQ(counters_.rejected_frames.load(), 2u);
}

TEST_F(IngestConnectionTest, GarbageIsFatal) {
  IngestConnection c(manager_.get(), &counters_, &log_, {}, 1024);
  std::string out;
  EXPECT_FALSE(c.OnFrame("\xff\xff\xff\xff\xff", &out));
  auto r = Replies(out);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error().fatal());
  EXPECT_EQ(counters_.rejected_frames.load(), 1u);
  EXPECT_EQ(counters_.rejected_connections.load(), 1u);
  EXPECT_TRUE(manager_->List().empty());
}

TEST_F(IngestConnectionTest, FirstMessageMustBeHelloAndOnlyOnce) {
  IngestConnection c(manager_.get(), &counters_, &log_, {}, 1024);
  std::string out;
  v1::AgentMessage hb;
  hb.mutable_heartbeat();
  EXPECT_FALSE(c.OnFrame(Payload(hb), &out));
  EXPECT_EQ(Replies(out)[0].error().code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));

  IngestConnection d(manager_.get(), &counters_, &log_, {}, 1024);
  out.clear();
  ASSERT_TRUE(d.OnFrame(Payload(Hello()), &out));
  EXPECT_FALSE(d.OnFrame(Payload(Hello()), &out));
  d.OnClosed(false);
  ASSERT_EQ(manager_->List().size(), 1u);
  EXPECT_EQ(manager_->List()[0].state, SessionState::kAborted);
}

TEST_F(IngestConnectionTest, UnknownVersionIsRefused) {
  IngestConnection c(manager_.get(), &counters_, &log_, {}, 1024);
  std::string out;
  v1::AgentMessage h = Hello();
  h.mutable_hello()->set_protocol_version(static_cast<v1::ProtocolVersion>(2));
  EXPECT_FALSE(c.OnFrame(Payload(h), &out));
  auto r = Replies(out);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error().fatal());
  EXPECT_EQ(r[0].error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(counters_.rejected_connections.load(), 1u);
}

TEST_F(IngestConnectionTest, TruncatedStreamAbortsAndCounts) {
  std::string out;
  {
    IngestConnection c(manager_.get(), &counters_, &log_, {}, 1024);
    ASSERT_TRUE(c.OnFrame(Payload(Hello()), &out));
    c.OnClosed(/*truncated=*/true);
  }
  EXPECT_EQ(counters_.rejected_frames.load(), 1u);
  EXPECT_EQ(manager_->List()[0].state, SessionState::kAborted);
}

TEST_F(IngestConnectionTest, AFirstFrameLargerThanAHelloIsFatalLaterOnesMayBeLarge) {
  constexpr uint32_t kLimit = 1 << 20;
  IngestConnection c(manager_.get(), &counters_, &log_, {}, kLimit);
  std::string out;
  EXPECT_TRUE(c.OnFrameHeader(IngestConnection::kMaxHelloFrameBytes, &out));
  EXPECT_FALSE(c.OnFrameHeader(IngestConnection::kMaxHelloFrameBytes + 1, &out));
  auto r = Replies(out);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error().fatal());
  EXPECT_EQ(r[0].error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(counters_.rejected_frames.load(), 1u);

  IngestConnection d(manager_.get(), &counters_, &log_, {}, kLimit);
  out.clear();
  ASSERT_TRUE(d.OnFrame(Payload(Hello()), &out));
  EXPECT_TRUE(d.has_session());
  EXPECT_TRUE(d.OnFrameHeader(kLimit, &out));
}

TEST_F(IngestConnectionTest, ATimeoutIsAFatalDeadlineExceededAndCounted) {
  std::string out;
  IngestConnection c(manager_.get(), &counters_, &log_, {}, 1024);
  EXPECT_FALSE(c.has_session());
  c.OnTimeout(absl::DeadlineExceededError("no Hello within 10s"), &out);
  auto r = Replies(out);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error().fatal());
  EXPECT_EQ(r[0].error().code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(r[0].error().message(), "no Hello within 10s");
  EXPECT_EQ(counters_.connections_timed_out.load(), 1u);
  EXPECT_EQ(counters_.rejected_connections.load(), 1u);
}

// The Welcome says how far the session's snapshot on disk goes, and a Durable follows each
// snapshot that moved it, once.
// Over a manager that writes snapshots (a data directory).
class IngestConnectionDurable : public ::testing::Test {
 protected:
  void SetUp() override {
    SessionManagerOptions o;
    o.data_dir = dir_.path();
    auto m = SessionManager::Create(o, &counters_);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }
  test_util::TempDir dir_{"ttconn"};
  DaemonCounters counters_;
  RateLimitedLog log_;
  std::unique_ptr<SessionManager> manager_;
};

TEST_F(IngestConnectionDurable, WelcomeCarriesTheDurablePointAndEachSnapshotIsAcknowledgedOnce) {
  IngestConnection c(manager_.get(), &counters_, &log_, {3, 0, 0}, 1 << 20);
  std::string out;
  ASSERT_TRUE(c.OnFrame(Payload(Hello()), &out));
  auto r = Replies(out);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_TRUE(r[0].welcome().has_durable_sequence());  // Present: this daemon acknowledges.
  EXPECT_EQ(r[0].welcome().durable_sequence(), 0u);
  out.clear();
  c.AppendDurable(&out);
  EXPECT_TRUE(out.empty()) << "nothing on disk yet";

  v1::AgentMessage table;
  table.mutable_layer_table()->add_layers()->set_full_name("fc");
  ASSERT_TRUE(c.OnFrame(Payload(table), &out));
  v1::AgentMessage ev;
  ev.mutable_events()->set_sequence(7);
  ev.mutable_events()->set_first_event(0);
  ev.mutable_events()->add_forward()->set_layer_id(0);
  ev.mutable_events()->add_forward()->set_layer_id(0);
  ASSERT_TRUE(c.OnFrame(Payload(ev), &out));
  manager_->WriteDueSnapshots();
  c.AppendDurable(&out);
  r = Replies(out);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_TRUE(r[0].has_durable());
  EXPECT_EQ(r[0].durable().sequence(), 7u);
  EXPECT_EQ(r[0].durable().events(), 2u);
  out.clear();
  manager_->WriteDueSnapshots();  // Nothing changed: no new snapshot, no new acknowledgement.
  c.AppendDurable(&out);
  EXPECT_TRUE(out.empty());
}

// The End is answered with the session's final snapshot, written before OnFrame returns, and its
// Durable frame: the agent waits for it before it lets the session's tail go. The durable wake-up
// is called for every other snapshot written, from the writing thread, until the End.
TEST_F(IngestConnectionDurable, TheEndIsAnsweredWithTheFinalSnapshotsAcknowledgement) {
  int wakes = 0;
  std::string id;
  {
    IngestConnection c(manager_.get(), &counters_, &log_, {3, 0, 0}, 1 << 20,
                       [&wakes] { ++wakes; });
    std::string out;
    ASSERT_TRUE(c.OnFrame(Payload(Hello()), &out));
    id = c.session_id();
    v1::AgentMessage table;
    table.mutable_layer_table()->add_layers()->set_full_name("fc");
    ASSERT_TRUE(c.OnFrame(Payload(table), &out));
    v1::AgentMessage ev;
    ev.mutable_events()->set_sequence(1);
    ev.mutable_events()->set_first_event(0);
    ev.mutable_events()->add_forward()->set_layer_id(0);
    ASSERT_TRUE(c.OnFrame(Payload(ev), &out));
    manager_->WriteDueSnapshots();
    EXPECT_EQ(wakes, 1);
    c.AppendDurable(&out);
    ev.mutable_events()->set_sequence(2);
    ev.mutable_events()->set_first_event(1);
    ASSERT_TRUE(c.OnFrame(Payload(ev), &out));
    out.clear();
    v1::AgentMessage end;
    end.mutable_end();
    ASSERT_TRUE(c.OnFrame(Payload(end), &out));
    auto r = Replies(out);
    ASSERT_EQ(r.size(), 1u);
    ASSERT_TRUE(r[0].has_durable()) << r[0].DebugString();
    EXPECT_EQ(r[0].durable().sequence(), 2u);
    EXPECT_EQ(r[0].durable().events(), 2u);
    EXPECT_EQ(wakes, 1);  // The final one goes straight into `out`.
    auto snap = manager_->GetSnapshot(id);
    ASSERT_TRUE(snap.ok());
    EXPECT_EQ(snap->session.state, SessionState::kFinished);
  }
  absl::StatusOr<TraceRecord> record = ReadTraceFile(manager_->SnapshotPath(id));
  ASSERT_TRUE(record.ok()) << record.status();
  std::optional<protocol::SessionIndexEntry> a = TakeSnapshotAccounting(&*record);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->info.state, SessionState::kFinished);
  EXPECT_EQ(a->info.events, 2u);
  // The connection is gone: its wake-up is no longer called.
  v1::EventBatch more;
  more.add_forward()->set_layer_id(0);
  manager_->Find(id)->session->AddBatchBytes(more.SerializeAsString()).value();
  manager_->WriteDueSnapshots();
  EXPECT_EQ(counters_.snapshots_written.load(), 3u);
  EXPECT_EQ(wakes, 1);
}

}  // namespace
}  // namespace tracetorch::daemon
