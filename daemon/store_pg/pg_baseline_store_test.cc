// PgBaselineStore against a real PostgreSQL server that the test starts itself
// (postgres_server.h): round trips, the schema and its version, two stores (as two replicas would
// be) setting one name at once, and the server restarted under the store.
#include "daemon/store_pg/pg_baseline_store.h"

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/store_pg/pg_connection.h"
#include "daemon/store_pg/pg_schema.h"
#include "daemon/store_pg/postgres_server.h"
#include "daemon/testing/records.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch::daemon {
namespace {

using test_util::MakeLinearRecord;
using test_util::PostgresServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::vector<v1::LayerHistory> MakeHistory(int layers, int steps) {
  std::vector<v1::LayerHistory> out;
  for (int l = 0; l < layers; ++l) {
    v1::LayerHistory& h = out.emplace_back();
    h.set_full_name(absl::StrCat("l", l));
    for (int s = 0; s < steps; ++s) {
      h.add_steps(static_cast<uint64_t>(s));
      h.add_latency_ms(0.5 + 0.01 * s);
      h.add_output_std(s == 2 ? std::nan("") : 1.0);
      h.add_grad_norm(1.0);
      h.add_non_finite(s == 2);
    }
  }
  return out;
}

std::vector<std::string> Names(const std::vector<v1::BaselineInfo>& list) {
  std::vector<std::string> out;
  for (const v1::BaselineInfo& b : list) out.push_back(b.name());
  return out;
}

class PgBaselineStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto s = PostgresServer::Start();
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    if (!server_->running()) {
      ASSERT_TRUE(server_->Restart().ok());
    }
    // Every test starts from an empty database.
    auto c = PgConnection::Open(server_->url());
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->Exec("DROP TABLE IF EXISTS tracetorch_baselines, tracetorch_job_ranks, "
                           "tracetorch_schema")
                    .ok());
  }
  std::unique_ptr<PgBaselineStore> Open() {
    auto s =
        PgBaselineStore::Open(server_->url(), [] { return absl::FromUnixSeconds(1700000000); });
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  static PostgresServer* server_;
};

PostgresServer* PgBaselineStoreTest::server_ = nullptr;

TEST_F(PgBaselineStoreTest, SetGetRoundTripWithHistory) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const TraceRecord record = MakeLinearRecord("Net", 3);
  auto info = store->Set("main", record, MakeHistory(1, 6), "session s-1");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->created_unix_ns(), 1700000000ll * 1000000000ll);
  EXPECT_EQ(info->source(), "session s-1");
  EXPECT_EQ(info->model_name(), "Net");
  EXPECT_EQ(info->layers(), 3u);
  EXPECT_TRUE(info->has_history());

  auto got = store->Get("main");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->record, record);
  EXPECT_EQ(got->info.SerializeAsString(), info->SerializeAsString());
  ASSERT_EQ(got->history.size(), 1u);
  EXPECT_EQ(got->history[0].latency_ms_size(), 6);
  EXPECT_TRUE(std::isnan(got->history[0].output_std(2)));
  EXPECT_TRUE(got->history[0].non_finite(2));
  EXPECT_THAT(store->Describe(), HasSubstr("postgresql host="));
  EXPECT_THAT(store->Describe(), HasSubstr("dbname=postgres"));
}

TEST_F(PgBaselineStoreTest, ReplaceListRemoveAndErrors) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Set("b", MakeLinearRecord("B", 2), {}, "upload").ok());
  ASSERT_TRUE(store->Set("a", MakeLinearRecord("A", 1), {}, "upload").ok());
  ASSERT_TRUE(store->Set("Z", MakeLinearRecord("Z", 1), {}, "upload").ok());
  ASSERT_TRUE(store->Set("b", MakeLinearRecord("B2", 4), MakeHistory(4, 2), "baseline a").ok());
  auto list = store->List();
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_THAT(Names(*list), ElementsAre("Z", "a", "b"));  // Bytewise, as the file store.
  EXPECT_EQ((*list)[2].model_name(), "B2");
  EXPECT_EQ((*list)[2].layers(), 4u);
  EXPECT_TRUE((*list)[2].has_history());
  EXPECT_FALSE((*list)[1].has_history());

  ASSERT_TRUE(store->Remove("a").ok());
  EXPECT_EQ(store->Remove("a").code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(store->Get("a").status().message(), HasSubstr("no baseline named 'a'"));
  EXPECT_EQ(store->Get("../x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Set(".hidden", MakeLinearRecord("x", 1), {}, "upload").status().code(),
            absl::StatusCode::kInvalidArgument);
  list = store->List();
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(Names(*list), ElementsAre("Z", "b"));
}

TEST_F(PgBaselineStoreTest, TheSchemaIsVersionedAndANewerOneIsRefused) {
  ASSERT_NE(Open(), nullptr);
  auto again = Open();  // A second replica: nothing left to migrate.
  ASSERT_NE(again, nullptr);
  ASSERT_TRUE(again->Set("kept", MakeLinearRecord("Net", 1), {}, "upload").ok());

  auto c = PgConnection::Open(server_->url());
  ASSERT_TRUE(c.ok());
  auto version = (*c)->Exec("SELECT version FROM tracetorch_schema");
  ASSERT_TRUE(version.ok()) << version.status();
  ASSERT_EQ(version->rows(), 1);
  EXPECT_EQ(version->bytes(0, 0), absl::StrCat(kPgSchemaVersion));
  auto compressed = (*c)->Exec(
      "SELECT length(record) < record_bytes FROM tracetorch_baselines WHERE name = 'kept'");
  ASSERT_TRUE(compressed.ok());
  EXPECT_EQ(compressed->bytes(0, 0), "t");  // Stored compressed.

  ASSERT_TRUE((*c)->Exec("UPDATE tracetorch_schema SET version = 99").ok());
  auto newer = PgBaselineStore::Open(server_->url());
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(newer.status().message(), HasSubstr("schema version 99"));
}

TEST_F(PgBaselineStoreTest, ABadUrlOrNoServerIsAClearError) {
  auto bad = PgBaselineStore::Open("postgresql://[::1");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  auto none = PgBaselineStore::Open(
      absl::StrCat("postgresql:///postgres?host=/nonexistent-dir&user=tracetorch"));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable) << none.status();
  EXPECT_THAT(none.status().message(), HasSubstr("host=/nonexistent-dir"));
}

// Two stores over one database (two replicas) set one name over and over, each with a record,
// history and source of its own, while a third reads: every read is one writer's whole baseline.
TEST_F(PgBaselineStoreTest, ConcurrentSetsOfOneNameLeaveOneCompleteBaseline) {
  auto a = Open();
  auto b = Open();
  auto reader = Open();
  ASSERT_TRUE(a && b && reader);
  auto consistent = [](const Baseline& got) {
    const std::string& model = got.record.metadata.model_name;
    const size_t n = model == "A" ? 3 : 5;
    return (model == "A" || model == "B") && got.record.layers.size() == n &&
           got.history.size() == n && got.info.source() == absl::StrCat("writer ", model) &&
           got.info.layers() == n;
  };
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, torn{0};
  std::thread read([&] {
    while (!done.load()) {
      auto got = reader->Get("shared");
      if (got.ok()) {
        ++reads;
        if (!consistent(*got)) ++torn;
      }
    }
  });
  auto write = [](PgBaselineStore* s, const std::string& model, size_t n) {
    for (int i = 0; i < 40; ++i) {
      EXPECT_TRUE(s->Set("shared", MakeLinearRecord(model, static_cast<int>(n)),
                         MakeHistory(static_cast<int>(n), 3), absl::StrCat("writer ", model))
                      .ok());
    }
  };
  std::thread wa(write, a.get(), "A", 3);
  std::thread wb(write, b.get(), "B", 5);
  wa.join();
  wb.join();
  done = true;
  read.join();
  EXPECT_EQ(torn.load(), 0) << "of " << reads.load() << " reads";
  auto last = reader->Get("shared");
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(consistent(*last));
  auto list = reader->List();
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(Names(*list), ElementsAre("shared"));
}

TEST_F(PgBaselineStoreTest, AServerRestartIsUnavailableThenRecovers) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const TraceRecord record = MakeLinearRecord("Net", 2);
  ASSERT_TRUE(store->Set("main", record, MakeHistory(2, 3), "upload").ok());

  ASSERT_TRUE(server_->Stop().ok());
  for (int i = 0; i < 2; ++i) {  // The broken connection, then a failed reconnect.
    auto got = store->Get("main");
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
    EXPECT_THAT(got.status().message(), HasSubstr("PostgreSQL store (host="));
    EXPECT_THAT(got.status().message(), Not(HasSubstr("password")));
  }
  EXPECT_EQ(store->Set("other", record, {}, "upload").status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(store->List().status().code(), absl::StatusCode::kUnavailable);

  // A server restarted under an open connection: the next call reconnects by itself.
  ASSERT_TRUE(server_->Restart().ok());
  auto got = store->Get("main");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->record, record);
  EXPECT_EQ(got->history.size(), 2u);
  ASSERT_TRUE(server_->Restart().ok());
  ASSERT_TRUE(store->Set("other", record, {}, "upload").ok());
  auto list = store->List();
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_THAT(Names(*list), ElementsAre("main", "other"));
  EXPECT_THAT(*list, Not(IsEmpty()));
}

}  // namespace
}  // namespace tracetorch::daemon
