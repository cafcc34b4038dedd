// The ingest listener's socket handling on real sockets: claiming a path, the modes it sets, and
// access it cannot set being an error (run unprivileged, as root could set anything).
#include "daemon/ingest/ingest_server.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/core/counters.h"
#include "daemon/core/rate_limited_log.h"
#include "daemon/core/session_manager.h"
#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"
#include "protocol/wire.h"
#include "trace/testing/unprivileged.h"
#include "tracetorch/v1/agent.pb.h"

namespace tracetorch::daemon {
namespace {

using test_util::TempDir;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// A socket bound at `path` (never listening): what a crashed daemon leaves behind. -1 on error.
int BindAt(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A group this process is not in: chown to it needs privileges it does not have.
gid_t AGroupWeAreNotIn() {
  std::vector<gid_t> mine(static_cast<size_t>(getgroups(0, nullptr)) + 1);
  mine.resize(static_cast<size_t>(getgroups(static_cast<int>(mine.size()), mine.data())));
  mine.push_back(getegid());
  gid_t g = 1;
  while (std::find(mine.begin(), mine.end(), g) != mine.end()) ++g;
  return g;
}

class IngestServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = SessionManager::Create({}, &counters_);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  absl::StatusOr<std::unique_ptr<IngestServer>> Start(const std::string& path,
                                                      std::optional<gid_t> group = {}) {
    IngestServerOptions o;
    o.socket_path = path;
    o.socket_group = group;
    return IngestServer::Start(o, manager_.get(), &counters_, &log_);
  }
  absl::StatusOr<std::unique_ptr<IngestServer>> Start(IngestServerOptions o) {
    o.socket_path = dir_.path() + "/d.sock";
    return IngestServer::Start(o, manager_.get(), &counters_, &log_);
  }

  TempDir dir_{"ttingest"};
  DaemonCounters counters_;
  RateLimitedLog log_;
  std::unique_ptr<SessionManager> manager_;
};

TEST_F(IngestServerTest, TheSocketIs0660ItsNewDirectory0750AndShutdownRemovesIt) {
  const std::string path = dir_.path() + "/run/tracetorch/d.sock";
  auto server = Start(path);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(ModeOf(path), 0660u);
  EXPECT_EQ(ModeOf(dir_.path() + "/run/tracetorch"), 0750u);
  // A second daemon on the same path is refused while this one serves.
  const absl::Status again = ClaimSocketPath(path);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(again.message(), "already serving")) << again;
  (*server)->Shutdown();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(IngestServerTest, AStaleSocketIsReplacedAnythingElseIsRefused) {
  const std::string stale = dir_.path() + "/stale.sock";
  const int fd = BindAt(stale);
  ASSERT_GE(fd, 0);
  close(fd);  // Bound, never listening: nobody answers.
  EXPECT_TRUE(ClaimSocketPath(stale).ok());
  EXPECT_FALSE(std::filesystem::exists(stale));

  const std::string file = dir_.path() + "/file";
  { std::ofstream(file) << "x"; }
  const absl::Status s = ClaimSocketPath(file);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(std::filesystem::exists(file));
  EXPECT_EQ(ClaimSocketPath("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClaimSocketPath(std::string(200, 'x')).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(IngestServerTest, SetSocketAccessSetsTheModeAndGroup) {
  const std::string path = dir_.path() + "/s.sock";
  const int fd = BindAt(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(chmod(path.c_str(), 0777), 0);
  ASSERT_TRUE(SetSocketAccess(path, getegid()).ok());
  EXPECT_EQ(ModeOf(path), 0660u);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, getegid());
  close(fd);

  const std::string gone = dir_.path() + "/gone.sock";
  const absl::Status s = SetSocketAccess(gone, std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(s.message(), gone)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "mode 0660")) << s;
}

// A group the daemon may not give is an error before anyone can connect, and no socket is left
// behind. Root may give any group, so the check runs unprivileged.
TEST_F(IngestServerTest, AGroupItCannotGiveIsAStartupError) {
  ASSERT_EQ(chmod(dir_.path().c_str(), 0777), 0);  // The unprivileged child binds here.
  const std::string path = dir_.path() + "/d.sock";
  tracetorch::testing::ExpectAsUnprivileged([&] {
    const gid_t other = AGroupWeAreNotIn();
    const absl::Status direct = [&] {
      const int fd = BindAt(dir_.path() + "/direct.sock");
      if (fd < 0) return absl::InternalError("bind");
      absl::Status s = SetSocketAccess(dir_.path() + "/direct.sock", other);
      close(fd);
      return s;
    }();
    auto server = Start(path, other);
    return direct.code() == absl::StatusCode::kPermissionDenied &&
           absl::StrContains(direct.message(), "direct.sock") &&
           absl::StrContains(direct.message(), "give group") && !server.ok() &&
           server.status().code() == absl::StatusCode::kPermissionDenied &&
           absl::StrContains(server.status().message(), path) && !std::filesystem::exists(path);
  });
  ASSERT_EQ(chmod(dir_.path().c_str(), 0700), 0);
}

// A raw agent on a real socket: frames out, DaemonMessages in.
class RawPeer {
 public:
  explicit RawPeer(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    if (connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~RawPeer() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

  bool Write(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  bool Send(const v1::AgentMessage& m) { return Write(Frame(m.SerializeAsString())); }
  static std::string Frame(std::string_view payload) {
    std::string out(protocol::wire::kFrameHeaderBytes, '\0');
    protocol::wire::PutFrameHeader(static_cast<uint32_t>(payload.size()), out.data());
    out.append(payload);
    return out;
  }
  bool Hello(const std::string& resume = "") {
    v1::AgentMessage m;
    m.mutable_hello()->set_protocol_version(v1::PROTOCOL_VERSION_1);
    m.mutable_hello()->mutable_identity()->set_pid(getpid());
    m.mutable_hello()->set_resume_session_id(resume);
    return Send(m);
  }

  // The next DaemonMessage; nullopt at EOF (or after 30 s: a test that hangs fails instead).
  std::optional<v1::DaemonMessage> Next() {
    while (true) {
      if (in_.size() >= protocol::wire::kFrameHeaderBytes) {
        const uint32_t len = protocol::wire::GetFrameHeader(in_.data());
        if (in_.size() >= protocol::wire::kFrameHeaderBytes + len) {
          v1::DaemonMessage m;
          const bool parsed = m.ParseFromArray(in_.data() + protocol::wire::kFrameHeaderBytes,
                                               static_cast<int>(len));
          in_.erase(0, protocol::wire::kFrameHeaderBytes + len);
          if (!parsed) return std::nullopt;
          return m;
        }
      }
      if (!Readable(30000)) return std::nullopt;
      char buf[4096];
      const ssize_t n = read(fd_, buf, sizeof(buf));
      if (n <= 0) return std::nullopt;
      in_.append(buf, static_cast<size_t>(n));
    }
  }
  bool Readable(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, timeout_ms) == 1;
  }

 private:
  int fd_ = -1;
  std::string in_;
};

// Awaits an IngestError that closes the connection; its code, or -1.
int FatalCode(RawPeer& peer) {
  for (std::optional<v1::DaemonMessage> m = peer.Next(); m.has_value(); m = peer.Next()) {
    if (m->has_error() && m->error().fatal()) {
      return peer.Next().has_value() ? -2 : m->error().code();  // Then the daemon closes.
    }
  }
  return -1;
}

TEST_F(IngestServerTest, AConnectionWithoutAHelloInTimeIsClosed) {
  IngestServerOptions o;
  o.hello_timeout = absl::Milliseconds(50);
  auto server = Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  RawPeer silent(dir_.path() + "/d.sock");
  ASSERT_TRUE(silent.ok());
  EXPECT_EQ(FatalCode(silent), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  // A Hello started but never finished is no better.
  RawPeer partial(dir_.path() + "/d.sock");
  ASSERT_TRUE(partial.Write(RawPeer::Frame("\x0a\x02\x08\x01").substr(0, 6)));
  EXPECT_EQ(FatalCode(partial), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(counters_.connections_timed_out.load(), 2u);
}

// After the Hello, bytes that never complete a frame are not progress: a peer trickling a frame
// one byte at a time is closed by the idle timeout, its session aborted.
TEST_F(IngestServerTest, ASlowPeerThatNeverCompletesAFrameIsClosed) {
  IngestServerOptions o;
  o.idle_timeout = absl::Milliseconds(100);
  auto server = Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  RawPeer slow(dir_.path() + "/d.sock");
  ASSERT_TRUE(slow.Hello());
  std::optional<v1::DaemonMessage> welcome = slow.Next();
  ASSERT_TRUE(welcome.has_value() && welcome->has_welcome());
  const char header[4] = {0, 16, 0, 0};  // A frame of 4096 bytes...
  ASSERT_TRUE(slow.Write(std::string_view(header, 4)));
  // ... sent one byte whenever the daemon has said nothing for 10 ms, until it closes the
  // connection (never all 4096: the frame is never completed).
  int sent = 0;
  while (sent < 4095 && !slow.Readable(10)) {
    ASSERT_TRUE(slow.Write("\x08"));
    ++sent;
  }
  ASSERT_LT(sent, 4095) << "the daemon kept a connection that never completed a frame";
  EXPECT_EQ(FatalCode(slow), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(counters_.connections_timed_out.load(), 1u);
  ASSERT_EQ(manager_->List().size(), 1u);
  EXPECT_EQ(manager_->List()[0].state, SessionState::kAborted);
}

// One uid at its share of the slots is refused; another uid still connects and streams.
TEST_F(IngestServerTest, OneUidCannotTakeEverySlot) {
  ASSERT_EQ(chmod(dir_.path().c_str(), 0777), 0);  // The unprivileged child connects here.
  IngestServerOptions o;
  o.max_connections = 4;
  o.max_connections_per_uid = 2;
  o.socket_group = tracetorch::testing::kNobody;
  auto server = Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string path = dir_.path() + "/d.sock";
  RawPeer a(path), b(path);
  ASSERT_TRUE(a.Hello() && b.Hello());
  ASSERT_TRUE(a.Next().has_value() && b.Next().has_value());  // Welcomes: both hold a slot.
  RawPeer c(path);
  EXPECT_EQ(FatalCode(c), static_cast<int>(absl::StatusCode::kResourceExhausted));
  if (geteuid() == 0) {
    tracetorch::testing::ExpectAsUnprivileged([&] {
      RawPeer other(path);
      if (!other.Hello()) return false;
      std::optional<v1::DaemonMessage> m = other.Next();
      return m.has_value() && m->has_welcome();
    });
  }
  EXPECT_EQ(counters_.rejected_connections.load(), 1u);
  ASSERT_EQ(chmod(dir_.path().c_str(), 0700), 0);
}

// A uid's share of the slots held by connections that never say Hello (a same-uid flood): a real
// agent of that uid still gets in, taking the slot of the oldest idle connection, which is closed
// with ResourceExhausted and counted.
TEST_F(IngestServerTest, IdleConnectionsMakeRoomForAnAgentThatSaysHello) {
  IngestServerOptions o;
  o.max_connections = 8;
  o.max_connections_per_uid = 2;
  o.hello_timeout = absl::Seconds(60);
  auto server = Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string path = dir_.path() + "/d.sock";
  RawPeer idle1(path);
  ASSERT_TRUE(idle1.ok());
  ASSERT_TRUE(test_util::WaitFor([&] { return counters_.connections_open.load() == 1; }));
  RawPeer idle2(path);
  ASSERT_TRUE(idle2.ok());
  ASSERT_TRUE(test_util::WaitFor([&] { return counters_.connections_open.load() == 2; }));
  RawPeer agent(path);
  ASSERT_TRUE(agent.Hello());
  std::optional<v1::DaemonMessage> welcome = agent.Next();
  ASSERT_TRUE(welcome.has_value() && welcome->has_welcome())
      << "the idle connections locked it out";
  EXPECT_EQ(FatalCode(idle1), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(counters_.connections_evicted.load(), 1u);
  // The agent, greeted, is never taken for room: the next newcomer takes idle2's slot, and the
  // one after that finds only greeted connections.
  RawPeer second(path);
  ASSERT_TRUE(second.Hello());
  welcome = second.Next();
  ASSERT_TRUE(welcome.has_value() && welcome->has_welcome());
  EXPECT_EQ(FatalCode(idle2), static_cast<int>(absl::StatusCode::kResourceExhausted));
  RawPeer third(path);
  EXPECT_EQ(FatalCode(third), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(counters_.connections_evicted.load(), 2u);
  EXPECT_EQ(manager_->List().size(), 2u);
}

// While slots are scarce (the last quarter of a uid's share), a connection gets the short Hello
// deadline; earlier ones keep the full one.
TEST_F(IngestServerTest, ConnectionsTakingTheLastSlotsGetTheShortHelloDeadline) {
  IngestServerOptions o;
  o.max_connections = 16;
  o.max_connections_per_uid = 4;
  o.hello_timeout = absl::Seconds(60);
  o.scarce_hello_timeout = absl::Milliseconds(50);
  auto server = Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string path = dir_.path() + "/d.sock";
  std::vector<std::unique_ptr<RawPeer>> idle;
  for (size_t i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<RawPeer>(path));
    ASSERT_TRUE(test_util::WaitFor([&] { return counters_.connections_open.load() == i + 1; }));
  }
  // The third (3 of 4: scarce) is closed soon; the first two are not.
  EXPECT_EQ(FatalCode(*idle[2]), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(counters_.connections_timed_out.load(), 1u);
  EXPECT_FALSE(idle[0]->Readable(100));
  EXPECT_FALSE(idle[1]->Readable(0));
}

// An idle connection sleeps until its session's snapshot is written (an eventfd), instead of
// waking every 100 ms to look: a second of idleness costs the daemon's threads almost no wake-up,
// and the Durable frame still follows the snapshot at once.
TEST_F(IngestServerTest, AnIdleConnectionSleepsUntilASnapshotIsWritten) {
  SessionManagerOptions so;
  so.data_dir = dir_.path() + "/data";
  auto m = SessionManager::Create(so, &counters_);
  ASSERT_TRUE(m.ok()) << m.status();
  manager_ = *std::move(m);
  auto server = Start(IngestServerOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  RawPeer agent(dir_.path() + "/d.sock");
  ASSERT_TRUE(agent.Hello());
  ASSERT_TRUE(agent.Next().has_value());
  v1::AgentMessage table;
  table.mutable_layer_table()->add_layers()->set_full_name("fc");
  v1::AgentMessage batch;
  batch.mutable_events()->set_sequence(1);
  batch.mutable_events()->add_forward()->set_layer_id(0);
  ASSERT_TRUE(agent.Send(table) && agent.Send(batch));
  ASSERT_TRUE(test_util::WaitFor([&] { return counters_.events_total.load() == 1; }));

  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  absl::SleepFor(absl::Seconds(1));
  getrusage(RUSAGE_SELF, &after);
  // The test's own sleep is one switch; a 100 ms poll would add ten.
  EXPECT_LT(after.ru_nvcsw - before.ru_nvcsw, 5);

  manager_->WriteDueSnapshots();
  std::optional<v1::DaemonMessage> durable = agent.Next();
  ASSERT_TRUE(durable.has_value() && durable->has_durable());
  EXPECT_EQ(durable->durable().sequence(), 1u);
  EXPECT_EQ(durable->durable().events(), 1u);
}

// Session ownership by SO_PEERCRED: a daemon restarted before it persisted a session (no events
// yet) lets only the uid that created it continue it; another uid resuming that id gets a fresh
// session of its own.
TEST_F(IngestServerTest, AnotherUidCannotTakeOverAnUnpersistedSessionId) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "connecting as a second uid needs root (CI runs as root); uid " << geteuid();
  }
  ASSERT_EQ(chmod(dir_.path().c_str(), 0777), 0);  // The unprivileged child connects here.
  const std::string path = dir_.path() + "/d.sock";
  SessionManagerOptions so;
  so.data_dir = dir_.path() + "/data";
  IngestServerOptions o;
  o.socket_path = path;
  o.socket_group = tracetorch::testing::kNobody;
  std::string id;
  {
    auto m = SessionManager::Create(so, &counters_);
    ASSERT_TRUE(m.ok()) << m.status();
    auto server = IngestServer::Start(o, m->get(), &counters_, &log_);
    ASSERT_TRUE(server.ok()) << server.status();
    RawPeer owner(path);
    ASSERT_TRUE(owner.Hello());
    std::optional<v1::DaemonMessage> welcome = owner.Next();
    ASSERT_TRUE(welcome.has_value() && welcome->has_welcome());
    id = welcome->welcome().session_id();
  }  // The daemon goes away with the session unpersisted (no events: nothing on disk).
  auto m = SessionManager::Create(so, &counters_);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*m)->List().empty());
  auto server = IngestServer::Start(o, m->get(), &counters_, &log_);
  ASSERT_TRUE(server.ok()) << server.status();
  tracetorch::testing::ExpectAsUnprivileged([&] {
    RawPeer thief(path);
    if (!thief.Hello(id)) return false;
    std::optional<v1::DaemonMessage> w = thief.Next();
    return w.has_value() && w->has_welcome() && !w->welcome().resumed() &&
           w->welcome().session_id() != id;
  });
  RawPeer owner(path);
  ASSERT_TRUE(owner.Hello(id));
  std::optional<v1::DaemonMessage> again = owner.Next();
  ASSERT_TRUE(again.has_value() && again->has_welcome());
  EXPECT_TRUE(again->welcome().resumed());
  EXPECT_EQ(again->welcome().session_id(), id);
  ASSERT_EQ(chmod(dir_.path().c_str(), 0700), 0);
}

// An AgentMessage of about `bytes` that the daemon accepts: a heartbeat and an unknown field.
std::string LargeHeartbeat(size_t bytes) {
  v1::AgentMessage m;
  m.mutable_heartbeat();
  std::string payload = m.SerializeAsString();
  const size_t body = bytes - payload.size() - 6;
  payload += static_cast<char>((15 << 3) | 2);  // Field 15, length-delimited: unknown, skipped.
  for (size_t v = body;; v >>= 7) {
    if (v < 0x80) {
      payload += static_cast<char>(v);
      break;
    }
    payload += static_cast<char>((v & 0x7f) | 0x80);
  }
  payload.append(body, 'z');
  return payload;
}

// Two large frames that do not fit the ingest budget together: the second connection waits
// (reading nothing) until the first frame is done, and the budget is never exceeded.
TEST_F(IngestServerTest, LargeFramesShareTheMemoryBudgetAndGiveItBack) {
  constexpr uint32_t kFrame = 1 << 20;
  IngestServerOptions o;
  o.max_frame_bytes = kFrame;
  o.ingest_memory_bytes = kFrame + 4;
  auto server = Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string path = dir_.path() + "/d.sock";
  RawPeer a(path), b(path);
  ASSERT_TRUE(a.Hello() && b.Hello());
  ASSERT_TRUE(a.Next().has_value() && b.Next().has_value());
  const std::string frame = RawPeer::Frame(LargeHeartbeat(kFrame));
  const size_t half = frame.size() / 2;
  v1::AgentMessage end;
  end.mutable_end();
  IngestMemoryBudget* budget = (*server)->budget();
  // a's frame, half sent, holds the budget until it is complete...
  ASSERT_TRUE(a.Write(std::string_view(frame).substr(0, half)));
  budget->AwaitReservedForTesting(1);
  std::thread send_b([&] { EXPECT_TRUE(b.Write(frame) && b.Send(end)); });
  budget->AwaitWaitingForTesting(1);  // ... so b's waits, reading nothing.
  const IngestBudgetStats during = (*server)->budget()->stats();
  EXPECT_LE(during.reserved_bytes, o.ingest_memory_bytes);
  EXPECT_EQ(during.waiting, 1u);
  ASSERT_TRUE(a.Write(std::string_view(frame).substr(half)) && a.Send(end));
  send_b.join();
  ASSERT_TRUE(test_util::WaitFor([&] {
    const auto list = manager_->List();
    return list.size() == 2 &&
           std::all_of(list.begin(), list.end(), [](const protocol::SessionInfo& s) {
             return s.state == SessionState::kFinished;
           });
  }));
  (*server)->Shutdown();
  const IngestBudgetStats after = (*server)->budget()->stats();
  EXPECT_EQ(after.reserved_bytes, 0u);
  EXPECT_LE(after.peak_reserved_bytes, o.ingest_memory_bytes);
  EXPECT_GE(after.waits, 1u);
  EXPECT_EQ(counters_.rejected_frames.load(), 0u);
}

TEST_F(IngestServerTest, ABudgetSmallerThanOneFrameIsAStartupError) {
  IngestServerOptions o;
  o.max_frame_bytes = 1 << 20;
  o.ingest_memory_bytes = 1 << 20;  // The header does not fit.
  auto server = Start(o);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::daemon
