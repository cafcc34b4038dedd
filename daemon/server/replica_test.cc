// Two `--service-only` replicas over one PostgreSQL database (a real server the test starts,
// daemon/store_pg/postgres_server.h), driven through the gRPC service: concurrent SetBaseline of
// one name from both, identical diffs through either, and the database restarted mid-run.
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/server/daemon.h"
#include "daemon/store_pg/postgres_server.h"
#include "daemon/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protocol/record_proto.h"
#include "service_client/service_client.h"

namespace tracetorch::daemon {
namespace {

using test_util::PostgresServer;
using test_util::TempDir;
using ::testing::HasSubstr;

TraceRecord MakeRecord(const std::string& model, double latency, int layers = 3) {
  TraceRecord r;
  r.metadata.model_name = model;
  for (int i = 0; i < layers; ++i) {
    LayerTrace l;
    l.name = absl::StrCat("l", i);
    l.full_name = l.name;
    l.type = "Linear";
    l.depth = 1;
    l.latency_ms = l.latency_ms_mean = l.latency_ms_min = l.latency_ms_max = latency * (i + 1);
    l.forward_count = 4;
    r.layers.push_back(l);
  }
  return r;
}

v1::DiffOperand Upload(const TraceRecord& record) {
  v1::DiffOperand op;
  ToProto(record, op.mutable_record());
  return op;
}

v1::DiffRequest DiffAgainst(const std::string& baseline, const TraceRecord& current) {
  v1::DiffRequest request;
  request.mutable_baseline()->set_baseline_name(baseline);
  *request.mutable_current() = Upload(current);
  return request;
}

struct Replica {
  std::unique_ptr<Daemon> daemon;
  std::unique_ptr<service_client::TraceServiceClient> client;
};

class ReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pg = PostgresServer::Start();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *std::move(pg);
    for (int i = 0; i < 2; ++i) {
      DaemonConfig c;
      c.socket_path = absl::StrCat(dir_.path(), "/r", i, ".sock");
      c.service_socket_path = absl::StrCat(dir_.path(), "/r", i, "-rpc.sock");
      c.service_only = true;
      c.store = pg_->url();
      auto d = Daemon::Start(c);
      ASSERT_TRUE(d.ok()) << d.status();
      Replica& r = replicas_.emplace_back();
      r.daemon = *std::move(d);
      auto client =
          service_client::TraceServiceClient::Create(r.daemon->config().service_socket_path);
      ASSERT_TRUE(client.ok()) << client.status();
      r.client = *std::move(client);
    }
  }

  TempDir dir_{"ttrep"};
  std::unique_ptr<PostgresServer> pg_;
  std::vector<Replica> replicas_;
};

TEST_F(ReplicaTest, ServiceOnlyHasNoIngestSocket) {
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/r0.sock"));
  EXPECT_TRUE(std::filesystem::exists(replicas_[0].daemon->config().service_socket_path));
}

TEST_F(ReplicaTest, ConcurrentSetsThenIdenticalDiffsThroughEither) {
  const TraceRecord a = MakeRecord("A", 1.0);
  const TraceRecord b = MakeRecord("B", 2.0);
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 20; ++i) {
        auto info = replicas_[w].client->SetBaseline("main", Upload(w == 0 ? a : b));
        EXPECT_TRUE(info.ok()) << info.status();
      }
    });
  }
  for (std::thread& t : writers) t.join();

  const TraceRecord current = MakeRecord("A", 1.5);
  auto d0 = replicas_[0].client->Diff(DiffAgainst("main", current));
  auto d1 = replicas_[1].client->Diff(DiffAgainst("main", current));
  ASSERT_TRUE(d0.ok()) << d0.status();
  ASSERT_TRUE(d1.ok()) << d1.status();
  EXPECT_EQ(d0->SerializeAsString(), d1->SerializeAsString());
  EXPECT_EQ(d0->baseline_description(), "baseline main");
  auto l0 = replicas_[0].client->ListBaselines();
  auto l1 = replicas_[1].client->ListBaselines();
  ASSERT_TRUE(l0.ok() && l1.ok());
  ASSERT_EQ(l0->baselines_size(), 1);
  EXPECT_EQ(l0->SerializeAsString(), l1->SerializeAsString());
  const std::string model = l0->baselines(0).model_name();
  EXPECT_TRUE(model == "A" || model == "B") << model;  // One writer's, whole.
}

TEST_F(ReplicaTest, ADatabaseRestartIsUnavailableThenServesAgain) {
  ASSERT_TRUE(replicas_[0].client->SetBaseline("main", Upload(MakeRecord("A", 1.0))).ok());
  ASSERT_TRUE(pg_->Stop().ok());
  for (Replica& r : replicas_) {
    auto diff = r.client->Diff(DiffAgainst("main", MakeRecord("A", 1.0)));
    ASSERT_FALSE(diff.ok());
    EXPECT_EQ(diff.status().code(), absl::StatusCode::kUnavailable) << diff.status();
    EXPECT_THAT(diff.status().message(), HasSubstr("PostgreSQL store"));
    auto set = r.client->SetBaseline("other", Upload(MakeRecord("B", 1.0)));
    EXPECT_EQ(set.status().code(), absl::StatusCode::kUnavailable) << set.status();
  }
  ASSERT_TRUE(pg_->Restart().ok());
  for (Replica& r : replicas_) {
    auto diff = r.client->Diff(DiffAgainst("main", MakeRecord("A", 1.0)));
    ASSERT_TRUE(diff.ok()) << diff.status();
    EXPECT_TRUE(r.client->SetBaseline("other", Upload(MakeRecord("B", 1.0))).ok());
  }
  auto list = replicas_[1].client->ListBaselines();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->baselines_size(), 2);  // Nothing lost, nothing half-written.
}

}  // namespace
}  // namespace tracetorch::daemon
