// A real tracetorchd (in-process, on temporary sockets) driven by the real client library, raw
// sockets and the TraceService client. Handshakes and deadline polling only; no bare sleeps.
#include "daemon/server/daemon.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/daemon_client.h"
#include "daemon/testing/http_get.h"
#include "daemon/testing/test_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "protocol/agent_proto.h"
#include "protocol/record_proto.h"
#include "protocol/wire.h"
#include "service_client/service_client.h"
#include "trace/aggregator.h"
#include "trace/json.h"
#include "trace/testing/unprivileged.h"
#include "tracetorch/v1/service.grpc.pb.h"

namespace tracetorch::daemon {
namespace {

using test_util::TempDir;
using test_util::WaitFor;

using client::DaemonClient;
using client::DaemonClientOptions;

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.socket_path = dir_.path() + "/d.sock";
    config_.data_dir = dir_.path() + "/data";
    config_.snapshot_interval = absl::Milliseconds(200);
    StartDaemon();
  }

  void StartDaemon() {
    auto d = Daemon::Start(config_);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    auto s = service_client::TraceServiceClient::Create(daemon_->config().service_socket_path);
    ASSERT_TRUE(s.ok());
    service_ = *std::move(s);
  }

  std::unique_ptr<DaemonClient> NewClient(const std::string& model,
                                          size_t queue_capacity = 1 << 16) {
    DaemonClientOptions o;
    o.queue_capacity = queue_capacity;
    o.address = absl::StrCat("unix://", config_.socket_path);
    o.identity = protocol::CurrentProcessIdentity();
    o.identity.model_name = model;
    o.flush_interval = absl::Milliseconds(5);
    o.initial_backoff = absl::Milliseconds(5);
    o.max_backoff = absl::Milliseconds(50);
    auto c = DaemonClient::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  std::optional<v1::SessionInfo> FindSession(const std::string& id) {
    auto list = service_->ListSessions();
    if (!list.ok()) return std::nullopt;
    for (const auto& s : list->sessions()) {
      if (s.session_id() == id) return s;
    }
    return std::nullopt;
  }

  TempDir dir_;
  DaemonConfig config_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<service_client::TraceServiceClient> service_;
};

std::vector<protocol::LayerDecl> Layers(const std::string& prefix) {
  return {{0, {"fc", "Linear", prefix + ".fc", 2, 110}},
          {1, {"act", "ReLU", prefix + ".act", 2, 0}},
          {2, {prefix, "Net", prefix, 1, 0}}};
}

ForwardSample MakeForward(int step, int layer) {
  ForwardSample f;
  f.latency_ms = 0.5 + layer + 0.01 * step;
  f.inputs = {{{4, 8}, "torch.float32", "cpu", TensorStats{0.0, 1.0, -2.0, 2.0, 0, 0}}};
  f.outputs = {{{4, 8}, "torch.float32", "cpu", TensorStats{0.1, 0.5 + step, -1.0, 1.0, 0, 0}}};
  return f;
}

BackwardSample MakeBackward(int step) {
  BackwardSample b;
  b.latency_ms = 0.25;
  b.grad_norm = 1.0 + step;
  b.grad_mean = 0.01;
  return b;
}

// Streams `steps` steps through `c` and feeds the same samples to `ref` (when given).
void Stream(DaemonClient& c, int first_step, int steps, TraceAggregator* ref) {
  for (int step = first_step; step < first_step + steps; ++step) {
    for (int layer = 0; layer < 3; ++layer) {
      ForwardSample f = MakeForward(step, layer);
      if (ref != nullptr) {
        ASSERT_TRUE(ref->AddForward(layer, f).ok());
      }
      c.EnqueueForward(protocol::ToForwardEvent(layer, step, f));
    }
    for (int layer = 2; layer >= 0; --layer) {
      BackwardSample b = MakeBackward(step);
      if (ref != nullptr) {
        ASSERT_TRUE(ref->AddBackward(layer, b).ok());
      }
      c.EnqueueBackward({static_cast<uint32_t>(layer), static_cast<uint64_t>(step), b});
    }
  }
}

TEST_F(DaemonTest, StreamedSessionComesBackFromGetSnapshot) {
  auto c = NewClient("Net");
  c->DeclareLayers(Layers("net"));
  TraceAggregator ref;
  for (const auto& l : Layers("net")) ASSERT_TRUE(ref.DeclareLayer(l.info).ok());
  Stream(*c, 0, 50, &ref);
  c->SetEndInfo(123.0, 0);
  ASSERT_TRUE(c->Close(absl::Seconds(5)).ok());
  const std::string id = c->session_id();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(c->stats().sent_events, 300u);
  EXPECT_EQ(c->stats().dropped_events, 0u);

  ASSERT_TRUE(WaitFor([&] {
    auto s = FindSession(id);
    return s && s->state() == v1::SESSION_STATE_FINISHED;
  }));
  auto snap = service_->GetSnapshot(id);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->session().events(), 300u);
  EXPECT_EQ(snap->session().identity().model_name(), "Net");
  EXPECT_EQ(snap->session().peer_pid(), getpid());
  EXPECT_EQ(snap->session().peer_uid(), static_cast<int32_t>(getuid()));
  const TraceRecord got = FromProto(snap->record());
  EXPECT_EQ(got.layers, ref.Snapshot().layers);
  EXPECT_EQ(got.metadata.total_time_ms, 123.0);
  EXPECT_EQ(got.metadata.model_name, "Net");
  ASSERT_EQ(snap->history_size(), 3);
  EXPECT_EQ(snap->history(0).steps_size(), 50);

  auto latest = service_->GetSnapshot("latest");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->session().session_id(), id);
  EXPECT_EQ(service_->GetSnapshot("no-such").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(service_->GetSnapshot("").status().code(), absl::StatusCode::kInvalidArgument);

  auto stats = service_->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->events_total(), 300u);
  EXPECT_GT(stats->rss_bytes(), 0u);
}

TEST_F(DaemonTest, EightClientsAtOnceNothingMixed) {
  constexpr int kClients = 8;
  constexpr int kSteps = 200;
  std::vector<std::string> ids(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto c = NewClient(absl::StrCat("model", i));
      c->DeclareLayers(Layers(absl::StrCat("m", i)));
      Stream(*c, 0, kSteps, nullptr);
      EXPECT_TRUE(c->Close(absl::Seconds(10)).ok());
      EXPECT_EQ(c->stats().dropped_events, 0u);
      ids[static_cast<size_t>(i)] = c->session_id();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    const std::string& id = ids[static_cast<size_t>(i)];
    ASSERT_TRUE(WaitFor([&] {
      auto s = FindSession(id);
      return s && s->state() == v1::SESSION_STATE_FINISHED;
    }));
    auto snap = service_->GetSnapshot(id);
    ASSERT_TRUE(snap.ok());
    EXPECT_EQ(snap->session().identity().model_name(), absl::StrCat("model", i));
    EXPECT_EQ(snap->session().events(), kSteps * 6u);
    ASSERT_EQ(snap->record().layers_size(), 3);
    for (const auto& l : snap->record().layers()) {
      EXPECT_TRUE(absl::StartsWith(l.full_name(), absl::StrCat("m", i))) << l.full_name();
      EXPECT_EQ(l.forward_count(), kSteps);
      EXPECT_EQ(l.backward_count(), kSteps);
    }
  }
  EXPECT_EQ(service_->ListSessions()->sessions_size(), kClients);
}

// A process whose Close() budget runs out with its connection up (a loaded machine: test_daemon_
// stream's eight-sessions flake) still ends its session: the End goes out in one short write past
// the budget, the session is finished (not aborted, as if the process had crashed), and what was
// not sent is counted as dropped.
TEST_F(DaemonTest, AnAgentOutOfTimeAtCloseStillEndsItsSession) {
  auto c = NewClient("late");
  c->DeclareLayers(Layers("late"));
  ASSERT_TRUE(c->WaitUntilConnected(absl::Seconds(10)).ok());
  Stream(*c, 0, 20, nullptr);
  ASSERT_TRUE(c->Flush(absl::Seconds(10)).ok());
  Stream(*c, 20, 5, nullptr);  // Queued, never sent: no time is left for them.
  const absl::Status closed = c->Close(absl::ZeroDuration());
  EXPECT_EQ(closed.code(), absl::StatusCode::kDeadlineExceeded) << closed;
  const uint64_t dropped = c->stats().dropped_events;
  EXPECT_EQ(c->stats().sent_events + dropped, 25u * 6);
  std::optional<v1::SessionInfo> s;
  ASSERT_TRUE(WaitFor([&] {
    s = FindSession(c->session_id());
    return s.has_value() && s->state() != v1::SESSION_STATE_LIVE;
  }));
  EXPECT_EQ(s->state(), v1::SESSION_STATE_FINISHED);
  EXPECT_EQ(s->events() + s->dropped_events(), 25u * 6);
  EXPECT_EQ(s->dropped_events(), dropped);
}

// The doomed agent of KilledClientIsAbortedWithinOneSecondWithItsLastEvents, run in a fresh process
// (this binary again, by that test): a fork of this multi-threaded test process could inherit a
// lock another thread held (Abseil's, the allocator's) and hang. Streams 10 steps to the socket in
// $TRACETORCH_DOOMED_SOCKET, writes "ok ID" (or "no ...") to the fd $TRACETORCH_DOOMED_FD and waits
// to be killed. Skipped when run on its own.
TEST(DoomedClient, DISABLED_StreamsThenWaitsToBeKilled) {
  const char* socket = getenv("TRACETORCH_DOOMED_SOCKET");
  const char* fd = getenv("TRACETORCH_DOOMED_FD");
  if (socket == nullptr || fd == nullptr) GTEST_SKIP() << "run by KilledClientIsAborted...";
  DaemonClientOptions o;
  o.address = absl::StrCat("unix://", socket);
  o.identity = protocol::CurrentProcessIdentity();
  o.identity.model_name = "Doomed";
  o.flush_interval = absl::Milliseconds(5);
  o.initial_backoff = absl::Milliseconds(5);
  o.max_backoff = absl::Milliseconds(50);
  auto c = DaemonClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->DeclareLayers(Layers("d"));
  Stream(**c, 0, 10, nullptr);
  const bool flushed = (*c)->Flush(absl::Seconds(30)).ok();
  const std::string msg = absl::StrCat(flushed ? "ok " : "no ", (*c)->session_id());
  (void)!write(atoi(fd), msg.data(), msg.size());
  pause();  // SIGKILLed here.
}

TEST_F(DaemonTest, KilledClientIsAbortedWithinOneSecondWithItsLastEvents) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    setenv("TRACETORCH_DOOMED_SOCKET", config_.socket_path.c_str(), 1);
    setenv("TRACETORCH_DOOMED_FD", absl::StrCat(ready[1]).c_str(), 1);
    execl("/proc/self/exe", "daemon_test", "--gtest_filter=DoomedClient.*",
          "--gtest_also_run_disabled_tests", static_cast<char*>(nullptr));
    _exit(127);
  }
  bool reaped = false;
  absl::Cleanup kill_child = [&] {  // Also when an assertion below ends the test early.
    if (!reaped) {
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
    }
  };
  close(ready[1]);
  char buf[256] = {};
  const ssize_t n = read(ready[0], buf, sizeof(buf) - 1);
  close(ready[0]);
  ASSERT_GT(n, 3);
  const std::string msg(buf, static_cast<size_t>(n));
  ASSERT_TRUE(absl::StartsWith(msg, "ok ")) << msg;
  const std::string id = msg.substr(3);
  ASSERT_TRUE(WaitFor([&] {
    auto s = FindSession(id);
    return s && s->events() == 60u;
  }));
  kill(child, SIGKILL);
  const absl::Time killed = absl::Now();
  int status = 0;
  waitpid(child, &status, 0);
  reaped = true;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto s = FindSession(id);
        return s && s->state() == v1::SESSION_STATE_ABORTED;
      },
      absl::Seconds(3)));
  // The final snapshot is on disk within 1 s of the loss.
  const std::string file = config_.data_dir + "/sessions/" + id + ".json";
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(file); }, absl::Seconds(3)));
  EXPECT_LT(absl::Now() - killed, absl::Seconds(1));
  absl::StatusOr<TraceRecord> on_disk = ReadTraceFile(file);
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  ASSERT_EQ(on_disk->layers.size(), 3u);
  EXPECT_EQ(on_disk->layers[0].forward_count, 10);
  auto snap = service_->GetSnapshot(id);
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->record().layers_size(), 3);
  EXPECT_EQ(snap->record().layers(0).forward_count(), 10);
  EXPECT_EQ(snap->session().state(), v1::SESSION_STATE_ABORTED);
}

TEST_F(DaemonTest, RestartedDaemonContinuesTheSessionAndCountsTheGap) {
  auto c = NewClient("Survivor", /*queue_capacity=*/32);
  c->DeclareLayers(Layers("s"));
  for (int step = 0; step < 10; ++step) {  // One step (6 events) at a time: the queue holds 32.
    Stream(*c, step, 1, nullptr);
    ASSERT_TRUE(c->Flush(absl::Seconds(5)).ok());
  }
  const std::string id = c->session_id();
  ASSERT_TRUE(WaitFor([&] {
    auto s = FindSession(id);
    return s && s->events() == 60u;
  }));

  daemon_->Shutdown();
  daemon_.reset();
  // While the daemon is away the client keeps queueing (and, past the queue, dropping).
  Stream(*c, 10, 10, nullptr);
  StartDaemon();
  ASSERT_TRUE(WaitFor([&] { return c->stats().connects >= 2; })) << c->stats().last_error;
  EXPECT_EQ(c->session_id(), id);
  ASSERT_TRUE(c->Flush(absl::Seconds(5)).ok());
  for (int step = 20; step < 30; ++step) {
    Stream(*c, step, 1, nullptr);
    ASSERT_TRUE(c->Flush(absl::Seconds(5)).ok());
  }
  ASSERT_TRUE(c->Close(absl::Seconds(5)).ok());

  ASSERT_TRUE(WaitFor([&] {
    auto s = FindSession(id);
    return s && s->state() == v1::SESSION_STATE_FINISHED;
  }));
  auto snap = service_->GetSnapshot(id);
  ASSERT_TRUE(snap.ok()) << snap.status();
  // Every event the agent produced is either in the trace or counted as dropped.
  uint64_t in_trace = 0;
  for (const auto& l : snap->record().layers()) {
    in_trace += static_cast<uint64_t>(l.forward_count() + l.backward_count());
  }
  EXPECT_EQ(in_trace + snap->session().dropped_events(), 180u);
  EXPECT_GE(in_trace, 120u);                         // Before the restart and after the reconnect.
  EXPECT_GE(snap->session().dropped_events(), 28u);  // 60 queued while away; room for 32.
  EXPECT_EQ(snap->session().dropped_events(), c->stats().dropped_events);
  EXPECT_EQ(snap->session().events(), in_trace);
  ASSERT_EQ(FindSession(id)->session_id(), id);
  EXPECT_EQ(service_->ListSessions()->sessions_size(), 1);
}

// One uid at --max-sessions-per-uid: its next Hello is refused with a clear IngestError, which the
// agent counts on every retry and logs once; when a session of that uid ends, the agent gets in.
TEST_F(DaemonTest, ASessionBeyondTheUidsLimitIsRefusedCountedAndLoggedOnce) {
  daemon_->Shutdown();
  daemon_.reset();
  config_.sessions.max_live_sessions_per_uid = 1;
  StartDaemon();
  auto first = NewClient("First");
  ASSERT_TRUE(first->WaitUntilConnected(absl::Seconds(10)).ok()) << first->stats().last_error;

  absl::Mutex mu;
  std::vector<std::string> lines;
  DaemonClientOptions o;
  o.address = absl::StrCat("unix://", config_.socket_path);
  o.identity = protocol::CurrentProcessIdentity();
  o.initial_backoff = absl::Milliseconds(5);
  o.max_backoff = absl::Milliseconds(20);
  o.log = [&](std::string_view line) {
    absl::MutexLock lock(&mu);
    lines.emplace_back(line);
  };
  auto second = DaemonClient::Create(o);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(WaitFor([&] { return (*second)->stats().refused_handshakes >= 3; }))
      << (*second)->stats().last_error;
  EXPECT_FALSE((*second)->stats().connected);
  EXPECT_TRUE(absl::StrContains((*second)->stats().last_error, "--max-sessions-per-uid"))
      << (*second)->stats().last_error;
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(lines.size(), 1u) << "logged on every retry";
    EXPECT_TRUE(absl::StrContains(lines[0], "--max-sessions-per-uid")) << lines[0];
  }

  ASSERT_TRUE(first->Close(absl::Seconds(5)).ok());
  ASSERT_TRUE((*second)->WaitUntilConnected(absl::Seconds(10)).ok())
      << (*second)->stats().last_error;
  ASSERT_TRUE((*second)->Close(absl::Seconds(5)).ok());
  absl::MutexLock lock(&mu);
  EXPECT_EQ(lines.size(), 1u);
}

// Connects a raw socket to the ingest path.
int RawConnect(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Reads until EOF; returns the IngestErrors received (or a marker when the read timed out).
std::vector<v1::IngestError> ReadErrorsUntilClose(int fd) {
  std::string in;
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  std::vector<v1::IngestError> out;
  std::string_view rest(in);
  while (rest.size() >= 4) {
    const uint32_t len = protocol::wire::GetFrameHeader(rest.data());
    if (rest.size() < 4 + len) break;
    v1::DaemonMessage m;
    if (m.ParseFromArray(rest.data() + 4, static_cast<int>(len)) && m.has_error()) {
      out.push_back(m.error());
    }
    rest.remove_prefix(4 + len);
  }
  return out;
}

TEST_F(DaemonTest, MalformedFramesAreRejectedAndTheDaemonKeepsServing) {
  auto good = NewClient("Good");
  good->DeclareLayers(Layers("g"));
  Stream(*good, 0, 5, nullptr);

  {  // Oversized length.
    const int fd = RawConnect(config_.socket_path);
    ASSERT_GE(fd, 0);
    const char header[4] = {'\xff', '\xff', '\xff', '\x7f'};
    ASSERT_EQ(write(fd, header, 4), 4);
    auto errors = ReadErrorsUntilClose(fd);
    close(fd);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_TRUE(errors[0].fatal());
    EXPECT_EQ(errors[0].code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  }
  {  // Garbage payload.
    const int fd = RawConnect(config_.socket_path);
    const char frame[9] = {5, 0, 0, 0, '\xff', '\xff', '\xff', '\xff', '\xff'};
    ASSERT_EQ(write(fd, frame, 9), 9);
    auto errors = ReadErrorsUntilClose(fd);
    close(fd);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_TRUE(errors[0].fatal());
  }
  {  // Random bytes.
    const int fd = RawConnect(config_.socket_path);
    std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
    auto errors = ReadErrorsUntilClose(fd);
    close(fd);
    ASSERT_EQ(errors.size(), 1u);
  }
  {  // Truncated: a Hello, then half a frame, then the peer goes away.
    const int fd = RawConnect(config_.socket_path);
    v1::AgentMessage hello;
    hello.mutable_hello()->set_protocol_version(v1::PROTOCOL_VERSION_1);
    std::string bytes(4, '\0');
    protocol::wire::PutFrameHeader(static_cast<uint32_t>(hello.ByteSizeLong()), bytes.data());
    bytes += hello.SerializeAsString();
    const char partial[6] = {100, 0, 0, 0, 8, 1};
    bytes.append(partial, 6);
    ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    shutdown(fd, SHUT_WR);
    ReadErrorsUntilClose(fd);
    close(fd);
  }
  ASSERT_TRUE(WaitFor([&] {
    auto s = service_->GetStats();
    return s.ok() && s->rejected_frames() >= 4;
  })) << service_->GetStats()->DebugString();

  Stream(*good, 5, 5, nullptr);
  ASSERT_TRUE(good->Close(absl::Seconds(5)).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto s = FindSession(good->session_id());
    return s && s->state() == v1::SESSION_STATE_FINISHED && s->events() == 60u;
  }));
  EXPECT_EQ(good->stats().daemon_errors, 0u);
}

TEST_F(DaemonTest, SocketIsGroupOnlyAndASecondInstanceIsRefused) {
  struct stat st;
  ASSERT_EQ(stat(config_.socket_path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  ASSERT_EQ(stat(daemon_->config().service_socket_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);

  DaemonConfig second = config_;
  second.data_dir = dir_.path() + "/data2";
  auto d = Daemon::Start(second);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(d.status().message(), "already serving")) << d.status();

  // The real binary says so and exits non-zero, leaving the running daemon's socket alone.
  const std::string cmd = absl::StrCat(TRACETORCHD_BINARY, " --socket ", config_.socket_path,
                                       " --data-dir ", dir_.path(), "/data3 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) output += buf;
  const int rc = pclose(p);
  EXPECT_NE(WEXITSTATUS(rc), 0);
  EXPECT_TRUE(absl::StrContains(output, "already serving")) << output;
  auto c = NewClient("StillHere");
  EXPECT_TRUE(c->WaitUntilConnected(absl::Seconds(5)).ok());
}

// Two daemons on one data directory would overwrite each other's index: the second refuses,
// in-process and as the real binary (exit 1, naming the directory), and the first keeps serving.
// Runs the tracetorchd binary with `args` (stderr folded into stdout): its exit status (-1 when
// it did not exit) and output.
std::pair<int, std::string> RunTracetorchd(const std::string& args) {
  const std::string cmd = absl::StrCat(TRACETORCHD_BINARY, " ", args, " 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string output;
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) output += buf;
  const int rc = pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, output};
}

TEST_F(DaemonTest, ASecondDaemonOnTheSameDataDirectoryIsRefused) {
  DaemonConfig second = config_;
  second.socket_path = dir_.path() + "/other.sock";
  second.service_socket_path.clear();
  auto d = Daemon::Start(second);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(d.status().message(),
                                absl::StrCat("is using the data directory ", config_.data_dir)))
      << d.status();
  EXPECT_FALSE(std::filesystem::exists(second.socket_path));

  const auto [rc, output] = RunTracetorchd(
      absl::StrCat(" --socket ", dir_.path(), "/third.sock --data-dir ", config_.data_dir));
  EXPECT_EQ(rc, 1) << output;
  EXPECT_TRUE(absl::StrContains(output, absl::StrCat("another tracetorchd (pid ", getpid(),
                                                     ") is using the data directory ")))
      << output;
  auto c = NewClient("StillHere");
  EXPECT_TRUE(c->WaitUntilConnected(absl::Seconds(5)).ok());
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Snapshots, the index and the lock are 0640 and the directories the daemon makes 0750, under the
// common umask 022 (which would leave 0644 / 0755) and under umask 0.
// A daemon that speaks the ingest protocol as a tracetorchd from before durability
// acknowledgements: its Welcome has no durable_sequence and it never sends a Durable. It takes
// `first_connection_events` events on its first connection, then drops it, and takes the rest on
// its second one.
class OlderDaemon {
 public:
  OlderDaemon(const std::string& path, uint64_t first_connection_events)
      : first_events_(first_connection_events) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    EXPECT_EQ(bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 4), 0);
    thread_ = std::thread([this] { Run(); });
  }
  ~OlderDaemon() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }

  struct Connection {
    v1::Hello hello;
    uint64_t events = 0;
    uint64_t min_sequence = ~0ull;
    uint64_t max_sequence = 0;
    bool ended = false;
  };
  // Both connections, once the second one ended (or the daemon was shut down).
  std::vector<Connection> Wait() {
    done_.WaitForNotificationWithTimeout(absl::Seconds(20));
    absl::MutexLock lock(&mu_);
    return connections_;
  }
  bool first_dropped() const { return first_dropped_.HasBeenNotified(); }

 private:
  // Reads one frame's payload; false at EOF.
  static bool ReadFrame(int fd, std::string* payload) {
    char header[4];
    if (!ReadExactly(fd, header, 4)) return false;
    payload->resize(protocol::wire::GetFrameHeader(header));
    return ReadExactly(fd, payload->data(), payload->size());
  }
  static bool ReadExactly(int fd, char* p, size_t n) {
    while (n > 0) {
      const ssize_t got = read(fd, p, n);
      if (got <= 0) return false;
      p += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  }

  void Run() {
    for (int i = 0; i < 2; ++i) {
      const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) break;
      Connection c;
      std::string payload;
      while (ReadFrame(conn, &payload)) {
        v1::AgentMessage m;
        if (!m.ParseFromString(payload)) break;
        if (m.has_hello()) {
          c.hello = m.hello();
          protocol::wire::DaemonReply welcome;
          welcome.kind = protocol::wire::DaemonReply::Kind::kWelcome;
          welcome.session_id = "older-1";
          welcome.resumed = i > 0;
          std::string out;
          protocol::AppendDaemonFrame(welcome, &out);
          (void)!write(conn, out.data(), out.size());
        } else if (m.has_events()) {
          c.events += static_cast<uint64_t>(m.events().forward_size() + m.events().backward_size());
          c.min_sequence = std::min(c.min_sequence, m.events().sequence());
          c.max_sequence = std::max(c.max_sequence, m.events().sequence());
          if (i == 0 && c.events >= first_events_) break;
        } else if (m.has_end()) {
          c.ended = true;
          break;
        }
      }
      close(conn);
      {
        absl::MutexLock lock(&mu_);
        connections_.push_back(c);
      }
      if (i == 0) first_dropped_.Notify();
    }
    done_.Notify();
  }

  const uint64_t first_events_;
  int fd_ = -1;
  std::thread thread_;
  absl::Notification first_dropped_;
  absl::Notification done_;
  absl::Mutex mu_;
  std::vector<Connection> connections_ ABSL_GUARDED_BY(mu_);
};

// A daemon that acknowledges nothing would count re-sent events twice: against it the agent
// re-sends nothing after a reconnect, and its Hello's sent_events lets that daemon count exactly
// what it did not take.
TEST(DaemonClientAndAnOlderDaemon, NothingIsReSentAndSentEventsCountEverything) {
  TempDir dir;
  const std::string path = dir.path() + "/older.sock";
  OlderDaemon older(path, /*first_connection_events=*/60);
  DaemonClientOptions o;
  o.address = absl::StrCat("unix://", path);
  o.identity = protocol::CurrentProcessIdentity();
  o.max_batch_events = 6;
  o.initial_backoff = absl::Milliseconds(5);
  o.max_backoff = absl::Milliseconds(20);
  auto c = DaemonClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->DeclareLayers(Layers("o"));
  for (int step = 0; step < 10; ++step) {
    Stream(**c, step, 1, nullptr);
    ASSERT_TRUE((*c)->Flush(absl::Seconds(5)).ok());
  }
  ASSERT_TRUE(WaitFor([&] { return older.first_dropped(); }));
  ASSERT_TRUE(WaitFor([&] { return (*c)->stats().connects >= 2; })) << (*c)->stats().last_error;
  Stream(**c, 10, 5, nullptr);
  ASSERT_TRUE((*c)->Close(absl::Seconds(5)).ok()) << (*c)->stats().last_error;
  const std::vector<OlderDaemon::Connection> conns = older.Wait();
  ASSERT_EQ(conns.size(), 2u);
  EXPECT_EQ(conns[0].events, 60u);
  EXPECT_TRUE(conns[1].ended);
  EXPECT_EQ(conns[1].hello.resume_session_id(), "older-1");
  EXPECT_GT(conns[1].min_sequence, conns[0].max_sequence) << "a batch was sent twice";
  EXPECT_EQ(conns[1].events, 30u);
  EXPECT_EQ((*c)->stats().resent_events, 0u);
  // What that daemon counts: sent_events minus what it holds is lost; here nothing.
  EXPECT_EQ(conns[1].hello.sent_events(), 60u);
  EXPECT_EQ((*c)->stats().sent_events + (*c)->stats().dropped_events, 90u);
}

TEST(DaemonFiles, AreGroupReadableOnlyWhateverTheUmask) {
  for (const mode_t mask : {mode_t{022}, mode_t{0}}) {
    TempDir dir{"ttmode"};
    const mode_t old = umask(mask);
    DaemonConfig config;
    config.socket_path = dir.path() + "/d.sock";
    config.data_dir = dir.path() + "/data";
    std::string id;
    {
      auto d = Daemon::Start(config);
      ASSERT_TRUE(d.ok()) << d.status();
      DaemonClientOptions o;
      o.address = absl::StrCat("unix://", config.socket_path);
      o.identity = protocol::CurrentProcessIdentity();
      auto c = DaemonClient::Create(o);
      ASSERT_TRUE(c.ok());
      (*c)->DeclareLayers(Layers("m"));
      Stream(**c, 0, 3, nullptr);
      ASSERT_TRUE((*c)->Close(absl::Seconds(5)).ok());
      id = (*c)->session_id();
      ASSERT_TRUE(WaitFor([&] {
        auto list = (*d)->sessions().List();
        return list.size() == 1 && list[0].state == SessionState::kFinished;
      }));
      (*d)->Shutdown();
    }
    umask(old);
    EXPECT_EQ(ModeOf(config.data_dir), 0750u);
    EXPECT_EQ(ModeOf(config.data_dir + "/sessions"), 0750u);
    EXPECT_EQ(ModeOf(config.data_dir + "/index.json"), 0640u);
    EXPECT_EQ(ModeOf(config.data_dir + "/lock"), 0640u);
    EXPECT_EQ(ModeOf(config.data_dir + "/sessions/" + id + ".json"), 0640u);
  }
}

TEST_F(DaemonTest, StaleSocketIsReplaced) {
  daemon_->Shutdown();
  daemon_.reset();
  // Leave a socket file nobody listens on.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, config_.socket_path.data(), config_.socket_path.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
  StartDaemon();
  auto c = NewClient("AfterStale");
  EXPECT_TRUE(c->WaitUntilConnected(absl::Seconds(5)).ok());
}

TEST_F(DaemonTest, ForkedChildSendsNothingAndDoesNotDeadlock) {
  auto c = NewClient("Parent");
  c->DeclareLayers(Layers("p"));
  ASSERT_TRUE(c->WaitUntilConnected(absl::Seconds(5)).ok());
  // A thread keeps the client's lock busy so that fork() may copy it held.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> produced{0};
  std::thread hammer([&] {
    uint64_t step = 0;
    while (!stop.load()) {
      BackwardSample b = MakeBackward(1);
      if (c->EnqueueBackward({0, step++, b})) produced.fetch_add(1);
    }
  });
  ASSERT_TRUE(WaitFor([&] { return produced.load() > 1000; }));
  for (int i = 0; i < 5; ++i) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      alarm(5);  // A deadlock would end the child by SIGALRM, failing the check below.
      bool ok = !c->EnqueueForward(protocol::ToForwardEvent(0, 0, MakeForward(0, 0)));
      ok = ok && !c->EnqueueBackward({0, 0, MakeBackward(0)});
      c->DeclareLayers(Layers("child"));
      ok = ok && c->Close(absl::Seconds(1)).code() == absl::StatusCode::kFailedPrecondition;
      ok = ok && c->session_id().empty();
      c.reset();  // Leaks the copy; must not join or lock.
      _exit(ok ? 0 : 3);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  stop.store(true);
  hammer.join();
  ASSERT_TRUE(c->Close(absl::Seconds(5)).ok());
  const uint64_t sent = c->stats().sent_events;
  const uint64_t dropped = c->stats().dropped_events;
  ASSERT_TRUE(WaitFor([&] {
    auto s = FindSession(c->session_id());
    return s && s->state() == v1::SESSION_STATE_FINISHED;
  }));
  auto list = service_->ListSessions();
  ASSERT_EQ(list->sessions_size(), 1);  // No session from any child.
  EXPECT_EQ(list->sessions(0).events(), sent);
  EXPECT_LE(sent, produced.load());
  EXPECT_EQ(c->stats().enqueued_events, produced.load());
  (void)dropped;
}

TEST_F(DaemonTest, WatchAndDiffRefuseRequestsWithoutTargets) {
  auto channel = grpc::CreateChannel(absl::StrCat("unix:", daemon_->config().service_socket_path),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::TraceService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::DiffResponse resp;
  // Diff is served (diff_service_test.cc); a request without operands is invalid.
  EXPECT_EQ(stub->Diff(&ctx, v1::DiffRequest(), &resp).error_code(), grpc::INVALID_ARGUMENT);
  grpc::ClientContext wctx;
  wctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  auto reader = stub->Watch(&wctx, v1::WatchRequest());
  v1::WatchUpdate update;
  EXPECT_FALSE(reader->Read(&update));
  // Watch is served (watch_integration_test.cc); a request without a target is invalid.
  EXPECT_EQ(reader->Finish().error_code(), grpc::INVALID_ARGUMENT);
}

TEST_F(DaemonTest, ShutdownAbortsLiveSessionsAndRemovesSockets) {
  auto c = NewClient("Live");
  c->DeclareLayers(Layers("l"));
  Stream(*c, 0, 3, nullptr);
  ASSERT_TRUE(c->Flush(absl::Seconds(5)).ok());
  const std::string id = c->session_id();
  ASSERT_TRUE(WaitFor([&] {
    auto s = FindSession(id);
    return s && s->events() == 18u;
  }));
  const std::string service_socket = daemon_->config().service_socket_path;
  daemon_->Shutdown();
  EXPECT_FALSE(std::filesystem::exists(config_.socket_path));
  EXPECT_FALSE(std::filesystem::exists(service_socket));
  EXPECT_TRUE(std::filesystem::exists(config_.data_dir + "/sessions/" + id + ".json"));
  EXPECT_TRUE(std::filesystem::exists(config_.data_dir + "/index.json"));
  EXPECT_EQ(c->Close(absl::Milliseconds(200)).code(), absl::StatusCode::kDeadlineExceeded);
}

// The gRPC socket's group is set as strictly as the ingest socket's: a group tracetorchd may not
// give stops the start, naming the socket it was setting up (the gRPC one comes first), and leaves
// no socket behind. Root may give any group, so the binary runs unprivileged.
TEST(TracetorchdBinary, ASocketGroupItCannotGiveIsAStartupError) {
  TempDir dir{"ttgroup"};
  ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);  // The unprivileged daemon writes here.
  const std::string socket = dir.path() + "/d.sock";
  const std::string rpc = dir.path() + "/tracetorchd-rpc.sock";
  tracetorch::testing::ExpectAsUnprivileged([&] {
    // Group "root" (0): one an unprivileged user is not in.
    const std::string cmd = absl::StrCat(TRACETORCHD_BINARY, " --socket ", socket, " --data-dir ",
                                         dir.path(), "/data --socket-group root 2>&1");
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return false;
    std::string output;
    char buf[512];
    while (fgets(buf, sizeof(buf), p) != nullptr) output += buf;
    const int rc = pclose(p);
    const bool refused = WIFEXITED(rc) && WEXITSTATUS(rc) == 1 &&
                         absl::StrContains(output, "cannot start") &&
                         absl::StrContains(output, absl::StrCat("give group 0 to socket ", rpc)) &&
                         !std::filesystem::exists(socket) && !std::filesystem::exists(rpc);
    if (!refused) std::fprintf(stderr, "exit status %d: %s\n", rc, output.c_str());
    return refused;
  });
  ASSERT_EQ(chmod(dir.path().c_str(), 0700), 0);
}

// --metrics-listen: /metrics on the picked port holds the GetStats counters and the live session.
TEST(DaemonMetrics, ServesGetStatsAndTheLiveSessionsOnMetricsListen) {
  TempDir dir{"ttmetrics"};
  DaemonConfig config;
  config.socket_path = dir.path() + "/d.sock";
  config.data_dir = dir.path() + "/data";
  config.metrics_address = "127.0.0.1:0";
  auto d = Daemon::Start(config);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_GT((*d)->metrics_port(), 0);
  DaemonClientOptions o;
  o.address = absl::StrCat("unix://", config.socket_path);
  o.identity = protocol::CurrentProcessIdentity();
  o.identity.model_name = "Scraped";
  o.flush_interval = absl::Milliseconds(5);
  auto c = DaemonClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->DeclareLayers(std::vector<protocol::LayerDecl>{{0, {"fc", "Linear", "fc", 1, 10}}});
  ForwardSample f;
  f.latency_ms = 1.5;
  (*c)->EnqueueForward(protocol::ToForwardEvent(0, 0, f));
  ASSERT_TRUE(test_util::WaitFor([&] { return (*d)->Stats().events_total() == 1; }));

  const std::string text = test_util::HttpGet((*d)->metrics_port(), "/metrics");
  EXPECT_TRUE(absl::StrContains(text, "\ntracetorchd_events_total 1\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\ntracetorchd_live_sessions 1\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "model=\"Scraped\"} 1\n")) << text;  // One step.

  // The same port again: the second daemon cannot serve it and says where.
  TempDir other{"ttmetrics2"};
  DaemonConfig second;
  second.socket_path = other.path() + "/d.sock";
  second.data_dir = other.path() + "/data";
  second.metrics_address = absl::StrCat("127.0.0.1:", (*d)->metrics_port());
  auto refused = Daemon::Start(second);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), second.metrics_address))
      << refused.status();
  EXPECT_TRUE((*c)->Close(absl::Seconds(5)).ok());
}

// A flag it cannot use is one line naming the flag and what was given, exit 2, and nothing made.
TEST(TracetorchdBinary, ABadFlagIsOneLineAndExitTwo) {
  TempDir dir{"ttflags"};
  const std::string where =
      absl::StrCat("--socket ", dir.path(), "/d.sock --data-dir ", dir.path(), "/data ");
  struct Case {
    std::string flag;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"--retain-sessions -1", "--retain-sessions: must be a number >= 0, got '-1'"},
           {"--snapshot-interval 0", "--snapshot-interval: must be a number > 0, got '0'"},
           {"--retain-days nan", "--retain-days: must be a number >= 0, got 'nan'"},
           {"--hello-timeout -2", "--hello-timeout: must be a number > 0, got '-2'"},
           {"--no-such-flag", "--no-such-flag"},
           {"--metrics-listen 127.0.0.1:x",
            "--metrics-listen: metrics address '127.0.0.1:x': the port must be a number "
            "0..65535"},
       }) {
    const auto [rc, output] = RunTracetorchd(where + c.flag);
    EXPECT_EQ(rc, 2) << c.flag << ": " << output;
    EXPECT_TRUE(absl::StartsWith(output, "tracetorchd: ")) << output;
    EXPECT_TRUE(absl::StrContains(output, c.message)) << output;
    EXPECT_TRUE(absl::EndsWith(output, "(see 'tracetorchd --help')\n")) << output;
    EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/data")) << c.flag;
  }
  const auto [rc, output] = RunTracetorchd("--help");
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(absl::StrContains(output, "--retain-sessions")) << output;
}

}  // namespace
}  // namespace tracetorch::daemon
