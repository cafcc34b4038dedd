// BuildJobSnapshot over a SessionManager (no sockets), then a real daemon with three agents of one
// job streaming through the client library, one of them slow.
#include "daemon/core/job.h"

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/daemon_client.h"
#include "daemon/server/daemon.h"
#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"
#include "protocol/record_proto.h"
#include "service_client/service_client.h"
#include "trace/divergence.h"

namespace tracetorch::daemon {
namespace {

using test_util::TempDir;
using test_util::WaitFor;

// ---- Over a SessionManager --------------------------------------------------------------------

class FakeClock {
 public:
  absl::Time Now() {
    now_ += absl::Seconds(1);
    return now_;
  }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
};

protocol::Hello RankHello(const std::string& job, std::optional<int> rank, int pid) {
  protocol::Hello h;
  h.protocol_version = 1;
  h.identity.pid = pid;
  h.identity.host = "node";
  h.identity.job_id = job;
  if (rank.has_value()) h.identity.rank = *rank;
  return h;
}

// Layers "enc" and "head"; `steps` forwards at latency (1 ms, 2 ms) * scale, grad norm 1.
void FeedLayers(Session& s, double scale, int steps = 5) {
  std::vector<protocol::LayerDecl> t;
  const char* names[] = {"enc", "head"};
  for (uint32_t i = 0; i < 2; ++i) {
    t.push_back({i, {names[i], "Linear", names[i], /*depth=*/1, /*params=*/0}});
  }
  ASSERT_TRUE(s.DeclareLayers(t).ok());
  v1::EventBatch b;
  for (int step = 0; step < steps; ++step) {
    for (uint32_t i = 0; i < 2; ++i) {
      v1::ForwardEvent* f = b.add_forward();
      f->set_layer_id(i);
      f->set_step(static_cast<uint64_t>(step));
      f->set_latency_ms((1.0 + i) * scale);
    }
    for (uint32_t i = 0; i < 2; ++i) {
      v1::BackwardEvent* e = b.add_backward();
      e->set_layer_id(i);
      e->set_step(static_cast<uint64_t>(step));
      e->set_grad_norm(1.0);
    }
  }
  const BatchOutcome outcome = s.AddBatchBytes(b.SerializeAsString()).value();
  ASSERT_TRUE(outcome.error.ok()) << outcome.error;
}

class JobSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = SessionManager::Create(SessionManagerOptions{}, &counters_,
                                    [this] { return clock_.Now(); });
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  // Opens a session and feeds it; returns its id.
  std::string Open(const std::string& job, std::optional<int> rank, double scale, int pid = 1) {
    auto opened = manager_->Open(RankHello(job, rank, pid), {pid, 1000, 1000});
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (!opened.ok()) return "";
    FeedLayers(*opened->session, scale);
    return opened->session->id();
  }

  FakeClock clock_;
  DaemonCounters counters_;
  std::unique_ptr<SessionManager> manager_;
};

TEST_F(JobSnapshotTest, ErrorsForEmptyUnknownJobAndBadThresholds) {
  Open("job-a", 0, 1.0);
  EXPECT_EQ(BuildJobSnapshot(*manager_, "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildJobSnapshot(*manager_, "job-b").status().code(), absl::StatusCode::kNotFound);
  DivergenceThresholds bad;
  bad.latency = -1;
  EXPECT_EQ(BuildJobSnapshot(*manager_, "job-a", bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(JobSnapshotTest, RanksInRankOrderNewestSessionPerRankRanklessLastByStart) {
  const std::string r2 = Open("job-a", 2, 1.0, 12);
  const std::string other = Open("job-b", 0, 1.0, 99);
  const std::string r0_old = Open("job-a", 0, 1.0, 10);
  const std::string none_1 = Open("job-a", std::nullopt, 1.0, 20);
  const std::string r1 = Open("job-a", 1, 1.0, 11);
  const std::string r0_new = Open("job-a", 0, 1.0, 13);  // Rank 0 restarted.
  const std::string none_2 = Open("job-a", std::nullopt, 1.0, 21);

  absl::StatusOr<v1::JobSnapshot> job = BuildJobSnapshot(*manager_, "job-a");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job_id(), "job-a");
  std::vector<std::string> ids;
  for (const v1::Snapshot& s : job->ranks()) ids.push_back(s.session().session_id());
  EXPECT_EQ(ids, (std::vector<std::string>{r0_new, r1, r2, none_1, none_2}));
  for (const v1::Snapshot& s : job->ranks()) {
    EXPECT_EQ(s.record().layers_size(), 2);
    EXPECT_EQ(s.history_size(), 2);  // Full snapshots, with history.
  }
  EXPECT_TRUE(job->divergences().empty());
  (void)r0_old;
  (void)other;
}

TEST_F(JobSnapshotTest, SlowRankIsFlaggedOnThatRankOnly) {
  Open("job-a", 0, 1.0, 10);
  Open("job-a", 1, 1.0, 11);
  Open("job-a", 2, 3.0, 12);
  absl::StatusOr<v1::JobSnapshot> job = BuildJobSnapshot(*manager_, "job-a");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->ranks_size(), 3);
  ASSERT_EQ(job->divergences_size(), 2);  // enc and head, latency.
  EXPECT_EQ(job->divergences(0).layer(), "enc");
  EXPECT_EQ(job->divergences(1).layer(), "head");
  for (const v1::Anomaly& a : job->divergences()) {
    EXPECT_EQ(a.type(), v1::ANOMALY_TYPE_RANK_DIVERGENCE);
    const Anomaly got = FromProto(a);
    EXPECT_EQ(got.type, AnomalyType::kRankDivergence);
    EXPECT_EQ(std::get<int64_t>(*FindDetail(got.details, "rank")), 2);
    EXPECT_EQ(std::get<std::string>(*FindDetail(got.details, "metric")), "latency_ms");
    EXPECT_TRUE(absl::StartsWith(got.message, "rank 2: forward latency")) << got.message;
  }
}

TEST_F(JobSnapshotTest, RanklessSessionsAreNamedBySession) {
  Open("job-a", std::nullopt, 1.0, 10);
  Open("job-a", std::nullopt, 1.0, 11);
  const std::string slow = Open("job-a", std::nullopt, 4.0, 12);
  absl::StatusOr<v1::JobSnapshot> job = BuildJobSnapshot(*manager_, "job-a");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->divergences_size(), 2);
  const Anomaly got = FromProto(job->divergences(0));
  EXPECT_EQ(std::get<int64_t>(*FindDetail(got.details, "rank")), -1);
  EXPECT_EQ(std::get<std::string>(*FindDetail(got.details, "label")), "session " + slow);
}

// Two ranks: the slower one is flagged against the faster (there is no median to stand for the
// job); two equal ranks are not.
TEST_F(JobSnapshotTest, OfTwoRanksTheSlowerIsFlaggedAgainstTheOther) {
  Open("job-a", 0, 1.0, 10);
  Open("job-a", 1, 5.0, 11);
  absl::StatusOr<v1::JobSnapshot> job = BuildJobSnapshot(*manager_, "job-a");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->ranks_size(), 2);
  ASSERT_FALSE(job->divergences().empty());
  for (const v1::Anomaly& a : job->divergences()) {
    const Anomaly got = FromProto(a);
    EXPECT_EQ(std::get<int64_t>(*FindDetail(got.details, "rank")), 1);
    EXPECT_TRUE(absl::StrContains(got.message, "the other rank's")) << got.message;
  }
}

TEST_F(JobSnapshotTest, TwoEqualRanksAreShownWithoutDivergence) {
  Open("job-b", 0, 1.0, 20);
  Open("job-b", 1, 1.0, 21);
  absl::StatusOr<v1::JobSnapshot> job = BuildJobSnapshot(*manager_, "job-b");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->ranks_size(), 2);
  EXPECT_TRUE(job->divergences().empty());
}

// ---- A real daemon, three agents of one job ---------------------------------------------------

TEST(JobIntegration, ThreeRanksOneSlowFlaggedOnThatRankOnly) {
  TempDir dir{"ttjob"};
  DaemonConfig config;
  config.socket_path = dir.path() + "/d.sock";
  config.data_dir = dir.path() + "/data";
  auto daemon = Daemon::Start(config);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto service =
      service_client::TraceServiceClient::Create((*daemon)->config().service_socket_path);
  ASSERT_TRUE(service.ok()) << service.status();

  constexpr int kRanks = 3;
  constexpr int kSlowRank = 1;
  constexpr int kSteps = 40;
  std::vector<std::string> ids(kRanks);
  std::vector<std::thread> agents;
  for (int rank = 0; rank < kRanks; ++rank) {
    agents.emplace_back([&, rank] {
      client::DaemonClientOptions o;
      o.address = absl::StrCat("unix://", config.socket_path);
      o.identity = protocol::CurrentProcessIdentity();
      o.identity.model_name = "Net";
      o.identity.job_id = "train-42";
      o.identity.rank = rank;
      o.identity.world_size = kRanks;
      o.flush_interval = absl::Milliseconds(5);
      auto c = client::DaemonClient::Create(o);
      ASSERT_TRUE(c.ok()) << c.status();
      (*c)->DeclareLayers({{0, {"fc1", "Linear", "net.fc1", 2, 110}},
                           {1, {"fc2", "Linear", "net.fc2", 2, 110}},
                           {2, {"net", "Net", "net", 1, 0}}});
      // ~3x latency on every layer of the slow rank, with a little per-rank jitter elsewhere.
      const double scale = rank == kSlowRank ? 3.0 : 1.0 + 0.03 * rank;
      for (int step = 0; step < kSteps; ++step) {
        for (uint32_t layer = 0; layer < 3; ++layer) {
          ForwardSample f;
          f.latency_ms = (0.4 + 0.3 * layer + 0.001 * step) * scale;
          (*c)->EnqueueForward(protocol::ToForwardEvent(layer, static_cast<uint64_t>(step), f));
        }
        for (int layer = 2; layer >= 0; --layer) {
          BackwardSample b;
          b.latency_ms = 0.2;
          b.grad_norm = 2.0 + 0.01 * rank;
          (*c)->EnqueueBackward({static_cast<uint32_t>(layer), static_cast<uint64_t>(step), b});
        }
      }
      EXPECT_TRUE((*c)->Close(absl::Seconds(10)).ok());
      ids[static_cast<size_t>(rank)] = (*c)->session_id();
    });
  }
  for (std::thread& t : agents) t.join();
  ASSERT_TRUE(WaitFor([&] {
    auto list = (*service)->ListSessions("train-42");
    if (!list.ok() || list->sessions_size() != kRanks) return false;
    for (const auto& s : list->sessions()) {
      if (s.state() != v1::SESSION_STATE_FINISHED) return false;
    }
    return true;
  }));

  absl::StatusOr<v1::JobSnapshot> job = BuildJobSnapshot((*daemon)->sessions(), "train-42");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->ranks_size(), kRanks);
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(job->ranks(rank).session().session_id(), ids[static_cast<size_t>(rank)]);
    EXPECT_EQ(job->ranks(rank).session().identity().rank(), rank);
    EXPECT_EQ(job->ranks(rank).record().layers_size(), 3);
  }
  ASSERT_EQ(job->divergences_size(), 3);  // Every layer, latency only; on the slow rank only.
  for (const v1::Anomaly& a : job->divergences()) {
    const Anomaly got = FromProto(a);
    EXPECT_EQ(got.type, AnomalyType::kRankDivergence);
    EXPECT_EQ(got.severity, AnomalySeverity::kWarning);
    EXPECT_EQ(std::get<int64_t>(*FindDetail(got.details, "rank")), kSlowRank) << got.message;
    EXPECT_EQ(std::get<std::string>(*FindDetail(got.details, "metric")), "latency_ms");
    EXPECT_GT(std::get<double>(*FindDetail(got.details, "ratio")), 2.5);
  }

  // The same answer from what a tool can see over the TraceService: ListSessions(job) and
  // GetSnapshot per session.
  auto list = (*service)->ListSessions("train-42");
  ASSERT_TRUE(list.ok());
  std::vector<TraceRecord> records;
  std::vector<int> ranks;
  for (const auto& s : list->sessions()) {
    auto snap = (*service)->GetSnapshot(s.session_id());
    ASSERT_TRUE(snap.ok()) << snap.status();
    records.push_back(FromProto(snap->record()));
    ranks.push_back(s.identity().rank());
  }
  std::vector<RankTrace> traces;
  for (size_t i = 0; i < records.size(); ++i) traces.push_back({ranks[i], "", &records[i]});
  const std::vector<Anomaly> remote = DetectRankDivergence(traces);
  ASSERT_EQ(remote.size(), 3u);
  for (const Anomaly& a : remote) {
    EXPECT_EQ(std::get<int64_t>(*FindDetail(a.details, "rank")), kSlowRank);
  }
  (*daemon)->Shutdown();
}

}  // namespace
}  // namespace tracetorch::daemon
