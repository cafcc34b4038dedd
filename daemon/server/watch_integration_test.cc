// Live Watch against a real tracetorchd (in-process, on temporary sockets): an agent streaming
// through the real client library, 64 real gRPC viewers
// (service_client::TraceServiceClient::Watch), and a viewer that stops reading. Handshakes and
// deadline polling only; no bare sleeps in the checks.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/daemon_client.h"
#include "daemon/server/daemon.h"
#include "daemon/testing/messages.h"
#include "daemon/testing/test_util.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "protocol/watch_state.h"
#include "service_client/service_client.h"
#include "service_client/watch_stream.h"
#include "tracetorch/v1/service.grpc.pb.h"

namespace tracetorch::daemon {
namespace {

using test_util::SameProto;
using test_util::TempDir;

using client::DaemonClient;
constexpr int kViewers = 64;
constexpr int kLayers = 8;

// 64 viewers on a shared machine: more time than the other daemon tests.
bool WaitFor(const std::function<bool()>& pred) {
  return test_util::WaitFor(pred, absl::Seconds(30));
}

// One viewer on its own connection, reading on its own thread until the stream ends.
class Viewer {
 public:
  Viewer(const std::string& address, const v1::WatchRequest& request) {
    auto c = service_client::TraceServiceClient::Create(address);
    EXPECT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
    stream_ = client_->Watch(request);
    thread_ = std::thread([this] { Run(); });
  }
  ~Viewer() { Join(); }

  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  void Cancel() { stream_->Cancel(); }

  uint64_t updates() const { return updates_.load(); }
  // After Join():
  bool in_order() const { return in_order_; }
  const absl::Status& apply_status() const { return apply_status_; }
  const absl::Status& finish_status() const { return finish_status_; }
  v1::WatchUpdate::KindCase last_kind() const { return last_kind_; }
  const protocol::WatchState& state() const { return state_; }

 private:
  void Run() {
    v1::WatchUpdate u;
    uint64_t last = 0;
    while (stream_->Read(&u)) {
      if (u.sequence() <= last) in_order_ = false;
      last = u.sequence();
      if (absl::Status s = state_.Apply(u); !s.ok() && apply_status_.ok()) apply_status_ = s;
      last_kind_ = u.kind_case();
      updates_.fetch_add(1);
    }
    finish_status_ = stream_->Finish();
  }

  std::unique_ptr<service_client::TraceServiceClient> client_;
  std::unique_ptr<service_client::WatchStream> stream_;
  std::atomic<uint64_t> updates_{0};
  bool in_order_ = true;
  absl::Status apply_status_;
  absl::Status finish_status_;
  v1::WatchUpdate::KindCase last_kind_ = v1::WatchUpdate::KIND_NOT_SET;
  protocol::WatchState state_;
  std::thread thread_;
};

class WatchIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.socket_path = dir_.path() + "/d.sock";
    config_.data_dir = dir_.path() + "/data";
    auto d = Daemon::Start(config_);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    rpc_ = daemon_->config().service_socket_path;
    auto s = service_client::TraceServiceClient::Create(rpc_);
    ASSERT_TRUE(s.ok());
    service_ = *std::move(s);
  }

  // An agent that declares kLayers layers and streams a step (forward + backward of every layer)
  // every `period` on its own thread until StopAgent().
  void StartAgent(absl::Duration period) {
    client::DaemonClientOptions o;
    o.address = absl::StrCat("unix://", config_.socket_path);
    o.identity = protocol::CurrentProcessIdentity();
    o.identity.model_name = "WatchedNet";
    o.flush_interval = absl::Milliseconds(5);
    auto c = DaemonClient::Create(o);
    ASSERT_TRUE(c.ok()) << c.status();
    agent_ = *std::move(c);
    std::vector<protocol::LayerDecl> decls;
    for (int l = 0; l < kLayers; ++l) {
      decls.push_back({static_cast<uint32_t>(l),
                       {absl::StrCat("l", l), "Linear", absl::StrCat("net.l", l), 2, 100}});
    }
    agent_->DeclareLayers(decls);
    ASSERT_TRUE(agent_->WaitUntilConnected(absl::Seconds(10)).ok());
    session_id_ = agent_->session_id();
    Step(0);
    ASSERT_TRUE(agent_->Flush(absl::Seconds(10)).ok());
    agent_thread_ = std::thread([this, period] {
      for (uint64_t step = 1; !stop_agent_.load(); ++step) {
        Step(step);
        steps_.fetch_add(1);
        absl::SleepFor(period);
      }
    });
  }

  void Step(uint64_t step) {
    for (int l = 0; l < kLayers; ++l) {
      protocol::ForwardEvent f;
      f.layer_id = static_cast<uint32_t>(l);
      f.step = step;
      f.latency_ms = 0.1 + 0.01 * l + 1e-6 * static_cast<double>(step);
      protocol::WireTensor t;
      t.shape = {4, 8};
      t.stats = TensorStats{0.0, 1.0, -1.0, 1.0, 0, 0};
      f.outputs.push_back(t);
      agent_->EnqueueForward(std::move(f));
    }
    for (int l = kLayers - 1; l >= 0; --l) {
      protocol::BackwardEvent b;
      b.layer_id = static_cast<uint32_t>(l);
      b.step = step;
      b.sample.grad_norm = 1.0 + 1e-3 * static_cast<double>(step);
      agent_->EnqueueBackward(b);
    }
  }

  void StopAgent(bool close = true) {
    stop_agent_ = true;
    if (agent_thread_.joinable()) agent_thread_.join();
    if (close && agent_ != nullptr) {
      agent_->SetEndInfo(1.0, 0);
      EXPECT_TRUE(agent_->Close(absl::Seconds(10)).ok());
    }
  }

  v1::WatchRequest Request(double interval_s) const {
    v1::WatchRequest r;
    r.mutable_session()->set_session_id(session_id_);
    r.set_interval_s(interval_s);
    return r;
  }

  v1::DaemonStats Stats() {
    auto s = service_->GetStats();
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::DaemonStats();
  }

  void TearDown() override {
    StopAgent(/*close=*/false);
    agent_.reset();
    if (daemon_ != nullptr) daemon_->Shutdown();
  }

  TempDir dir_;
  DaemonConfig config_;
  std::unique_ptr<Daemon> daemon_;
  std::string rpc_;
  std::unique_ptr<service_client::TraceServiceClient> service_;
  std::unique_ptr<DaemonClient> agent_;
  std::string session_id_;
  std::thread agent_thread_;
  std::atomic<bool> stop_agent_{false};
  std::atomic<uint64_t> steps_{0};
};

TEST_F(WatchIntegrationTest, SixtyFourViewersAndAStalledOneFollowASessionToItsEnd) {
  StartAgent(absl::Milliseconds(2));

  // The viewer that stops reading: it takes its first update and then nothing. Its connection
  // keeps gRPC's default 64 KiB stream window (no BDP growth), so that its unread updates fill the
  // transport within a few seconds and the daemon's writes to it stall; this only makes the stall
  // come sooner, it is the same as a viewer that reads nothing for a long time.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto channel = grpc::CreateCustomChannel(absl::StrCat("unix:", rpc_),
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = v1::TraceService::NewStub(channel);
  grpc::ClientContext stalled_context;
  std::unique_ptr<grpc::ClientReader<v1::WatchUpdate>> stalled =
      stub->Watch(&stalled_context, Request(0.05));
  protocol::WatchState stalled_state;
  {
    v1::WatchUpdate first;
    ASSERT_TRUE(stalled->Read(&first));
    ASSERT_EQ(first.kind_case(), v1::WatchUpdate::kFull);
    ASSERT_TRUE(stalled_state.Apply(first).ok());
  }

  std::vector<std::unique_ptr<Viewer>> viewers;
  for (int i = 0; i < kViewers; ++i) {
    viewers.push_back(std::make_unique<Viewer>(rpc_, Request(0.1)));
  }
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& v : viewers) {
      if (v->updates() == 0) return false;
    }
    return true;
  })) << "every viewer gets the current state at once";
  EXPECT_EQ(Stats().watchers(), static_cast<uint64_t>(kViewers + 1));

  // The stalled viewer's writes stop completing: its states are coalesced, never queued.
  ASSERT_TRUE(WaitFor([&] { return Stats().watch_updates_coalesced() > 0; }))
      << "the stalled viewer never stalled the daemon's writes";

  // While it stays stalled (its coalesced count keeps growing), every other viewer keeps
  // receiving updates and ingest keeps going.
  const v1::DaemonStats before = Stats();
  std::vector<uint64_t> counts;
  for (const auto& v : viewers) counts.push_back(v->updates());
  const absl::Time t0 = absl::Now();
  ASSERT_TRUE(WaitFor([&] {
    const v1::DaemonStats now = Stats();
    if (now.watch_updates_coalesced() < before.watch_updates_coalesced() + 20) return false;
    if (now.events_total() <= before.events_total()) return false;
    for (size_t i = 0; i < viewers.size(); ++i) {
      if (viewers[i]->updates() < counts[i] + 3) return false;
    }
    return true;
  })) << "a stalled viewer delayed the others or ingest";
  const double window_s = absl::ToDoubleSeconds(absl::Now() - t0);
  const v1::DaemonStats after = Stats();
  uint64_t min_more = ~0ull;
  for (size_t i = 0; i < viewers.size(); ++i) {
    min_more = std::min(min_more, viewers[i]->updates() - counts[i]);
  }
  std::printf(
      "while one viewer was stalled (%.2f s): every other viewer got >= %llu updates, the daemon "
      "took %llu events, %llu states coalesced\n",
      window_s, static_cast<unsigned long long>(min_more),
      static_cast<unsigned long long>(after.events_total() - before.events_total()),
      static_cast<unsigned long long>(after.watch_updates_coalesced() -
                                      before.watch_updates_coalesced()));

  // The session ends: every viewer gets the final state, session_ended, and an OK end.
  StopAgent();
  EXPECT_EQ(agent_->stats().dropped_events, 0u) << "ingest was held back";
  for (auto& v : viewers) v->Join();
  auto final_snapshot = service_->GetSnapshot(session_id_);
  ASSERT_TRUE(final_snapshot.ok()) << final_snapshot.status();
  ASSERT_EQ(final_snapshot->session().state(), v1::SESSION_STATE_FINISHED);
  for (const auto& v : viewers) {
    EXPECT_TRUE(v->in_order());
    EXPECT_TRUE(v->apply_status().ok()) << v->apply_status();
    EXPECT_TRUE(v->finish_status().ok()) << v->finish_status();
    EXPECT_EQ(v->last_kind(), v1::WatchUpdate::kSessionEnded);
    ASSERT_TRUE(v->state().ended().has_value());
    EXPECT_EQ(v->state().ended()->state(), v1::SESSION_STATE_FINISHED);
    ASSERT_TRUE(v->state().has_snapshot());
    EXPECT_TRUE(SameProto(v->state().snapshot(), *final_snapshot));
  }

  // The stalled viewer reads again: what it finds is bounded (what its transport had buffered
  // before the stall, then the newest state; not every state since), ends with the final state and
  // session_ended, in order.
  v1::WatchUpdate u;
  uint64_t last = 1;
  uint64_t read = 0;
  bool gap = false;
  while (stalled->Read(&u)) {
    EXPECT_GT(u.sequence(), last);
    gap = gap || u.sequence() > last + 1;
    last = u.sequence();
    ASSERT_TRUE(stalled_state.Apply(u).ok());
    ++read;
  }
  EXPECT_TRUE(stalled->Finish().ok());
  EXPECT_TRUE(gap) << "coalesced states show as a sequence gap";
  EXPECT_LT(read, last / 2) << "the stalled viewer got a backlog of " << read << " updates";
  ASSERT_TRUE(stalled_state.ended().has_value());
  EXPECT_TRUE(SameProto(stalled_state.snapshot(), *final_snapshot));

  ASSERT_TRUE(WaitFor([&] { return Stats().watchers() == 0; }));
  EXPECT_GT(Stats().watch_updates_sent(), static_cast<uint64_t>(kViewers * 3));
}

TEST_F(WatchIntegrationTest, DaemonShutdownReachesEveryViewer) {
  StartAgent(absl::Milliseconds(5));
  std::vector<std::unique_ptr<Viewer>> viewers;
  for (int i = 0; i < kViewers; ++i) {
    viewers.push_back(std::make_unique<Viewer>(rpc_, Request(0.05)));
  }
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& v : viewers) {
      if (v->updates() < 2) return false;
    }
    return true;
  }));
  StopAgent(/*close=*/false);  // The session stays live: only the shutdown ends the streams.
  const absl::Time t0 = absl::Now();
  daemon_->Shutdown();
  const absl::Duration took = absl::Now() - t0;
  for (auto& v : viewers) v->Join();
  for (const auto& v : viewers) {
    EXPECT_TRUE(v->in_order());
    EXPECT_EQ(v->last_kind(), v1::WatchUpdate::kShutdown);
    EXPECT_TRUE(v->state().shutdown());
    EXPECT_FALSE(v->state().ended().has_value());
    EXPECT_TRUE(v->finish_status().ok()) << v->finish_status();
  }
  std::printf("daemon shutdown with %d viewers took %.0f ms\n", kViewers,
              absl::ToDoubleMilliseconds(took));
  EXPECT_LT(took, absl::Seconds(5)) << "shutdown waited on the viewers";
}

TEST_F(WatchIntegrationTest, BadTargetsEndTheStreamWithTheirError) {
  StartAgent(absl::Milliseconds(20));
  {
    v1::WatchRequest r;
    r.mutable_session()->set_session_id("no-such-session");
    Viewer v(rpc_, r);
    v.Join();
    EXPECT_EQ(v.updates(), 0u);
    EXPECT_EQ(v.finish_status().code(), absl::StatusCode::kNotFound) << v.finish_status();
  }
  {
    Viewer v(rpc_, v1::WatchRequest());
    v.Join();
    EXPECT_EQ(v.finish_status().code(), absl::StatusCode::kInvalidArgument) << v.finish_status();
  }
  {
    v1::WatchRequest r = Request(-1);
    Viewer v(rpc_, r);
    v.Join();
    EXPECT_EQ(v.finish_status().code(), absl::StatusCode::kInvalidArgument) << v.finish_status();
  }
}

TEST_F(WatchIntegrationTest, ARequestThatIsNotAWatchRequestIsInvalidArgument) {
  // Watch is served raw (watch_service.cc parses its request itself): bytes that are no
  // WatchRequest, sent with a generic stub, end the stream with INVALID_ARGUMENT.
  grpc::GenericStub stub(grpc::CreateChannel("unix:" + rpc_, grpc::InsecureChannelCredentials()));
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, "/tracetorch.v1.TraceService/Watch", &cq);
  ASSERT_NE(call, nullptr);
  auto wait_for = [&cq](intptr_t expected) {
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(tag, reinterpret_cast<void*>(expected));
  };
  call->StartCall(reinterpret_cast<void*>(1));
  wait_for(1);
  grpc::Slice garbage("\xff\xff\xff", 3);  // A varint that never ends: no protobuf message.
  call->WriteLast(grpc::ByteBuffer(&garbage, 1), grpc::WriteOptions(), reinterpret_cast<void*>(2));
  wait_for(2);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(3));
  wait_for(3);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_F(WatchIntegrationTest, CancelEndsABlockedReadAndFreesTheViewer) {
  StartAgent(absl::Milliseconds(20));
  v1::WatchRequest r;
  r.mutable_session()->set_session_id("latest");
  r.set_interval_s(30);  // After the first update, the viewer blocks in Read.
  Viewer v(rpc_, r);
  ASSERT_TRUE(WaitFor([&] { return v.updates() == 1; }));
  ASSERT_TRUE(WaitFor([&] { return Stats().watchers() == 1; }));
  v.Cancel();
  v.Join();
  EXPECT_EQ(v.finish_status().code(), absl::StatusCode::kCancelled) << v.finish_status();
  EXPECT_TRUE(WaitFor([&] { return Stats().watchers() == 0; }));
}

}  // namespace
}  // namespace tracetorch::daemon
