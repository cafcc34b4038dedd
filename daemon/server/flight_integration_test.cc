// The flight recorder through a real tracetorchd (in-process, temporary sockets): the agent's
// client passes its memfd with the Hello, the daemon follows the position, calls a session
// stalled (sessions, /metrics) and live again, writes the bundle and serves it; an old agent
// without a recorder and a hostile one passing a pipe still stream. With a PostgreSQL fleet
// store, two daemons register their ranks of a job and either one answers GetJob for both.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/daemon_client.h"
#include "client/frame_socket.h"
#include "daemon/server/daemon.h"
#include "daemon/store_pg/postgres_server.h"
#include "daemon/testing/http_get.h"
#include "daemon/testing/test_util.h"
#include "flight/recorder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protocol/session_info_proto.h"
#include "protocol/wire.h"
#include "service_client/service_client.h"

namespace tracetorch::daemon {
namespace {

using client::DaemonClient;
using client::DaemonClientOptions;
using test_util::TempDir;
using test_util::WaitFor;
using ::testing::HasSubstr;

constexpr int64_t kMs = 1'000'000;

struct Agent {
  std::unique_ptr<flight::Recorder> recorder;
  std::unique_ptr<DaemonClient> client;

  // One more step: root, then layer 1 entered (where it is left).
  void Step(uint64_t step) {
    const int64_t now = flight::Recorder::MonotonicNs();
    recorder->BeginStep(step, now);
    recorder->Move(flight::Phase::kForward, flight::Event::kEnter, -1, step, now);
    recorder->Span(flight::SpanKind::kForward, 0, step, now, kMs, 0);
    recorder->Move(flight::Phase::kForward, flight::Event::kEnter, 1, step, now + kMs);
  }
};

class FlightIntegrationTest : public ::testing::Test {
 protected:
  std::unique_ptr<Daemon> StartDaemon(const std::string& name, const std::string& store = "") {
    DaemonConfig c;
    c.socket_path = absl::StrCat(dir_.path(), "/", name, ".sock");
    // Two daemons share the folder: each its own service socket (not tracetorchd-rpc.sock).
    c.service_socket_path = absl::StrCat(dir_.path(), "/", name, "-rpc.sock");
    c.data_dir = absl::StrCat(dir_.path(), "/", name, "-data");
    c.snapshot_interval = absl::Milliseconds(200);
    c.flight.stall_rule.floor = absl::Milliseconds(300);
    c.flight.poll_interval = absl::Milliseconds(20);
    c.metrics_address = "127.0.0.1:0";
    c.store = store;
    c.advertise = name;
    c.fleet_interval = absl::Milliseconds(50);
    // Not this test binary's own threads under ptrace: the fault tests stack real processes.
    c.stacks.policy = StackPolicy::kOff;
    absl::StatusOr<std::unique_ptr<Daemon>> d = Daemon::Start(c);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  }

  Agent NewAgent(const Daemon& daemon, bool with_recorder, const std::string& job = "",
                 int rank = 0) {
    Agent a;
    DaemonClientOptions o;
    o.address = absl::StrCat("unix://", daemon.config().socket_path);
    o.identity = protocol::CurrentProcessIdentity();
    o.identity.model_name = "Net";
    if (!job.empty()) {
      o.identity.job_id = job;
      o.identity.rank = rank;
    }
    o.flush_interval = absl::Milliseconds(5);
    o.initial_backoff = absl::Milliseconds(5);
    if (with_recorder) {
      a.recorder = *flight::Recorder::Create();
      a.recorder->AddName(0, "net.fc");
      a.recorder->AddName(1, "net.attn");
      a.recorder->SetRecording(true, flight::Recorder::MonotonicNs());
      o.flight_recorder_fd = a.recorder->fd();
      o.flight_layout_version = flight::kLayoutVersion;
      o.flight_region_bytes = a.recorder->size();
    }
    a.client = *DaemonClient::Create(o);
    a.client->DeclareLayers(std::vector<protocol::LayerDecl>{
        {0, {"fc", "Linear", "net.fc", 1, 10}}, {1, {"attn", "Attn", "net.attn", 1, 10}}});
    protocol::ForwardEvent e;
    e.layer_id = 0;
    a.client->EnqueueForward(e);
    EXPECT_TRUE(a.client->Flush(absl::Seconds(10)).ok());
    return a;
  }

  // As a viewer gets it (ListSessions).
  static v1::SessionInfo Info(Daemon& d, const std::string& id) {
    v1::SessionInfo out;
    for (const protocol::SessionInfo& s : d.sessions().List()) {
      if (s.session_id == id) protocol::ToProto(s, &out);
    }
    return out;
  }

  TempDir dir_;
};

TEST_F(FlightIntegrationTest, AStalledSessionIsReportedAndRecovers) {
  std::unique_ptr<Daemon> d = StartDaemon("a");
  ASSERT_NE(d, nullptr);
  Agent agent = NewAgent(*d, /*with_recorder=*/true);
  for (uint64_t s = 0; s < 4; ++s) agent.Step(s);
  const std::string id = agent.client->session_id();
  ASSERT_TRUE(WaitFor([&] { return Info(*d, id).flight().recorder(); }));
  ASSERT_TRUE(WaitFor([&] { return Info(*d, id).flight().stalled(); }));
  v1::SessionInfo info = Info(*d, id);
  EXPECT_EQ(info.state(), v1::SESSION_STATE_LIVE);
  EXPECT_EQ(info.flight().position(), "step 3, forward, in net.attn");
  EXPECT_EQ(info.flight().layer(), "net.attn");
  EXPECT_EQ(info.flight().stalls(), 1u);
  EXPECT_EQ(d->Stats().stalled_sessions(), 1u);
  EXPECT_EQ(d->Stats().flight_recorders(), 1u);
  // /metrics says so too.
  const std::string metrics = test_util::HttpGet(d->metrics_port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr(absl::StrCat("tracetorchd_session_stalled{session=\"", id)));
  EXPECT_THAT(metrics, HasSubstr("tracetorchd_stalled_sessions 1"));
  // The bundle, through the service: the ring and the stacks (this process: same uid).
  auto rpc = *service_client::TraceServiceClient::Create(d->config().service_socket_path);
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::ForensicsResponse> r = rpc->GetForensics(id, /*now=*/false);
    return r.ok() && r->bundles_size() == 1;
  }));
  v1::ForensicsResponse r = *rpc->GetForensics(id, /*now=*/true);
  ASSERT_EQ(r.bundles_size(), 2);
  EXPECT_EQ(r.bundles(0).reason(), "stalled");
  EXPECT_EQ(r.bundles(1).reason(), "now");
  EXPECT_EQ(r.bundles(0).spans_size(), 4);
  EXPECT_EQ(r.bundles(0).spans(3).layer(), "net.fc");
  ASSERT_GE(r.bundles(0).stacks_size(), 1);
  EXPECT_EQ(r.bundles(0).stacks(0).tool(), "eu-stack");
  EXPECT_THAT(r.bundles(0).stacks(0).error(), HasSubstr("stacks are off"));
  EXPECT_EQ(rpc->GetForensics("no-such-session", false).status().code(),
            absl::StatusCode::kNotFound);

  agent.Step(4);  // It moves again: live.
  ASSERT_TRUE(WaitFor([&] { return !Info(*d, id).flight().stalled(); }));
  EXPECT_EQ(Info(*d, id).flight().position(), "step 4, forward, in net.attn");
  EXPECT_EQ(d->Stats().stalled_sessions(), 0u);

  // Stopped recording (between `with` blocks): never a stall.
  agent.recorder->SetRecording(false, flight::Recorder::MonotonicNs());
  absl::SleepFor(absl::Milliseconds(600));  // Twice the floor: a stall would have been declared.
  EXPECT_FALSE(Info(*d, id).flight().stalled());
  EXPECT_EQ(Info(*d, id).flight().stalls(), 1u);
  ASSERT_TRUE(agent.client->Close(absl::Seconds(2)).ok());
  ASSERT_TRUE(WaitFor([&] { return Info(*d, id).state() == v1::SESSION_STATE_FINISHED; }));
}

TEST_F(FlightIntegrationTest, AgentsWithoutOrWithABadRecorderStillStream) {
  std::unique_ptr<Daemon> d = StartDaemon("a");
  ASSERT_NE(d, nullptr);
  Agent old_agent = NewAgent(*d, /*with_recorder=*/false);
  EXPECT_FALSE(Info(*d, old_agent.client->session_id()).flight().recorder());

  // A Hello announcing a recorder, passing a pipe: refused, counted; the session goes on.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  absl::StatusOr<client::FrameSocket> socket = client::FrameSocket::ConnectUnix(
      d->config().socket_path, absl::Now() + absl::Seconds(5), nullptr);
  ASSERT_TRUE(socket.ok()) << socket.status();
  protocol::ProcessIdentity id = protocol::CurrentProcessIdentity();
  protocol::wire::HelloFields hello;
  hello.identity = &id;
  hello.flight_layout_version = flight::kLayoutVersion;
  hello.flight_region_bytes = flight::kRegionBytes;
  std::string out;
  protocol::wire::AppendHelloFrame(hello, &out);
  ASSERT_TRUE(socket->WriteAllPassingFd(out, pipe_fds[0], absl::Now() + absl::Seconds(5)).ok());
  absl::StatusOr<std::optional<std::string>> reply;
  ASSERT_TRUE(WaitFor([&] {
    socket->WaitReadable(absl::Now() + absl::Seconds(1));
    reply = socket->ReadFrame();
    return reply.ok() && reply->has_value();
  }));
  absl::StatusOr<protocol::wire::DaemonReply> welcome = protocol::wire::ParseDaemonReply(**reply);
  ASSERT_TRUE(welcome.ok());
  EXPECT_EQ(welcome->kind, protocol::wire::DaemonReply::Kind::kWelcome);
  ASSERT_TRUE(WaitFor([&] { return d->Stats().flight_recorders_refused() == 1; }));
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

// Two daemons share a fleet store: each registers its rank of the job, and either answers GetJob
// with both (the daemon each rank lives on included).
TEST_F(FlightIntegrationTest, DaemonsSharingAFleetStoreFindEveryRankOfAJob) {
  absl::StatusOr<std::unique_ptr<test_util::PostgresServer>> pg =
      test_util::PostgresServer::Start();
  ASSERT_TRUE(pg.ok()) << pg.status();
  std::unique_ptr<Daemon> a = StartDaemon("node-a", (*pg)->url());
  std::unique_ptr<Daemon> b = StartDaemon("node-b", (*pg)->url());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  Agent r0 = NewAgent(*a, /*with_recorder=*/true, "job-7", 0);
  Agent r1 = NewAgent(*b, /*with_recorder=*/true, "job-7", 1);
  r0.Step(0);
  r1.Step(0);
  auto rpc = *service_client::TraceServiceClient::Create(a->config().service_socket_path);
  v1::JobResponse job;
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::JobResponse> r = rpc->GetJob("job-7");
    if (!r.ok() || r->ranks_size() != 2) return false;
    for (const v1::JobRank& rank : r->ranks()) {
      if (!rank.session().flight().recorder()) return false;
    }
    job = *std::move(r);
    return true;
  }));
  EXPECT_THAT(job.source(), HasSubstr("fleet store"));
  std::map<int, std::string> daemon_of;
  for (const v1::JobRank& rank : job.ranks()) {
    daemon_of[rank.session().identity().rank()] = rank.daemon();
    EXPECT_GT(rank.seen_unix_ns(), 0);
  }
  EXPECT_EQ(daemon_of[0], "node-a");
  EXPECT_EQ(daemon_of[1], "node-b");
  // A stall reaches the store too.
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::JobResponse> r = rpc->GetJob("job-7");
    if (!r.ok()) return false;
    int stalled = 0;
    for (const v1::JobRank& rank : r->ranks()) stalled += rank.session().flight().stalled();
    return stalled == 2;
  }));
  EXPECT_EQ(rpc->GetJob("").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::daemon
