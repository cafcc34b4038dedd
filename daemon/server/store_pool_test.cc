// The TraceService's Diff and baseline calls run on the store pool, not on gRPC's threads: with
// every store call blocked (a fake store standing for a PostgreSQL server that is away), the other
// methods still answer; over the pool's bound a call is answered "busy" at once, by the daemon;
// at shutdown the calls still queued are answered UNAVAILABLE.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/baseline_store.h"
#include "daemon/core/counters.h"
#include "daemon/core/diff_service.h"
#include "daemon/core/session_manager.h"
#include "daemon/core/worker_pool.h"
#include "daemon/rpc/service.h"
#include "daemon/testing/test_util.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service_client/service_client.h"

namespace tracetorch::daemon {
namespace {

using test_util::TempDir;
using test_util::WaitFor;
using ::testing::HasSubstr;

// Every List() blocks until Release(); counts the calls inside.
class BlockingStore final : public BaselineStore {
 public:
  absl::StatusOr<v1::BaselineInfo> Set(absl::string_view, const TraceRecord&,
                                       std::vector<v1::LayerHistory>, absl::string_view) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::StatusOr<Baseline> Get(absl::string_view) const override {
    return absl::NotFoundError("none");
  }
  absl::StatusOr<std::vector<v1::BaselineInfo>> List() const override {
    absl::MutexLock lock(&mu_);
    ++inside_;
    mu_.Await(absl::Condition(&released_));
    --inside_;
    return std::vector<v1::BaselineInfo>{};
  }
  absl::Status Remove(absl::string_view) override { return absl::NotFoundError("none"); }
  std::string Describe() const override { return "a store that blocks"; }

  int inside() const {
    absl::MutexLock lock(&mu_);
    return inside_;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }

 private:
  mutable absl::Mutex mu_;
  mutable int inside_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

class StorePoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    manager_ = SessionManager::Create(SessionManagerOptions{}, &counters_).value();
    diff_ = std::make_unique<DiffService>(manager_.get(), &store_);
    pool_ = std::make_unique<WorkerPool>(WorkerPoolOptions{.threads = 2, .max_queued = 1});
    ServiceDeps deps;
    deps.manager = manager_.get();
    deps.diff = diff_.get();
    deps.store_pool = pool_.get();
    deps.stats = [] { return v1::DaemonStats(); };
    service_ = std::make_unique<TraceServiceImpl>(std::move(deps));
    address_ = dir_.path() + "/rpc.sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + address_, grpc::InsecureServerCredentials());
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }

  void TearDown() override {
    store_.Release();
    StopServer();
    for (std::thread& t : callers_) t.join();
  }

  void StopServer() {
    if (server_ == nullptr) return;
    pool_->Stop();  // As the daemon does: gRPC's Shutdown waits for every call to be answered.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }

  // Two ListBaselines calls inside the store (the pool's two threads), then one queued behind them;
  // their statuses land in calls[0..2] (read them once the callers are joined).
  void FillThePool(absl::Status (&calls)[3]) {
    CallListBaselines(&calls[0]);
    ASSERT_TRUE(WaitFor([&] { return store_.inside() == 1; }));
    CallListBaselines(&calls[1]);
    ASSERT_TRUE(WaitFor([&] { return store_.inside() == 2; }));
    CallListBaselines(&calls[2]);
    ASSERT_TRUE(WaitFor([&] { return pool_->queued() == 1; }));
  }

  // ListBaselines on its own thread; its status lands in `*out`.
  void CallListBaselines(absl::Status* out) {
    callers_.emplace_back([this, out] {
      auto client = service_client::TraceServiceClient::Create(address_, absl::Seconds(60));
      *out = client.ok() ? (*client)->ListBaselines().status() : client.status();
    });
  }

  TempDir dir_{"ttpool"};
  DaemonCounters counters_;
  BlockingStore store_;
  std::unique_ptr<SessionManager> manager_;
  std::unique_ptr<DiffService> diff_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<TraceServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::vector<std::thread> callers_;
};

TEST_F(StorePoolTest, ABlockedStoreHoldsOnlyThePoolAndOverItsBoundTheDaemonSaysBusy) {
  absl::Status calls[3];
  FillThePool(calls);

  auto client = service_client::TraceServiceClient::Create(address_, absl::Seconds(30));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->ListSessions().ok());  // gRPC's threads are free.
  EXPECT_TRUE((*client)->GetStats().ok());

  const absl::Status busy = (*client)->ListBaselines().status();
  EXPECT_EQ(busy.code(), absl::StatusCode::kResourceExhausted) << busy;
  EXPECT_THAT(busy.message(), HasSubstr("tracetorchd is busy with diffs and baselines"));
  EXPECT_TRUE(service_client::AnsweredByDaemon(busy));

  store_.Release();
  for (std::thread& t : callers_) t.join();
  callers_.clear();
  for (const absl::Status& s : calls) EXPECT_TRUE(s.ok()) << s;
}

TEST_F(StorePoolTest, ACallStillQueuedAtShutdownIsAnsweredUnavailable) {
  absl::Status calls[3];
  FillThePool(calls);
  std::thread stopper([&] { StopServer(); });
  ASSERT_TRUE(WaitFor([&] { return pool_->queued() == 0; }));  // Answered by Stop().
  store_.Release();                                            // The running two finish.
  stopper.join();
  for (std::thread& t : callers_) t.join();
  callers_.clear();
  int ok = 0;
  int unavailable = 0;
  for (const absl::Status& s : calls) {
    ok += s.ok();
    unavailable += s.code() == absl::StatusCode::kUnavailable;
  }
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(unavailable, 1);
}

}  // namespace
}  // namespace tracetorch::daemon
