#include "daemon/core/watch_hub.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "daemon/core/history.h"
#include "daemon/testing/messages.h"
#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"
#include "protocol/watch_state.h"

namespace tracetorch::daemon {
namespace {

using test_util::Batch;
using test_util::MakeHello;
using test_util::SameProto;
using test_util::Table;
using test_util::Wire;

// A viewer's stream as the hub sees it: records what it was sent; writes complete when the test
// says so (a stalled viewer never completes them), or at once with `auto_complete`.
class FakeSink : public WatchSink {
 public:
  explicit FakeSink(bool auto_complete = false) : auto_complete_(auto_complete) {}

  // The hub and the viewer id, once Subscribe returned (the hub thread may send before that).
  void Attach(WatchHub* hub, uint64_t id) {
    bool complete = false;
    {
      absl::MutexLock lock(&mu_);
      hub_ = hub;
      id_ = id;
      complete = auto_complete_ && outstanding_;
      if (complete) outstanding_ = false;
    }
    if (complete) hub->WriteDone(id, true);
  }

  void SendUpdate(WatchWrite write) override {
    // The wire form is the update: the shared payload bytes, then the viewer's own.
    v1::WatchUpdate parsed;
    EXPECT_TRUE(parsed.ParseFromString((write.shared != nullptr ? *write.shared : std::string()) +
                                       write.own));
    EXPECT_TRUE(SameProto(parsed, *write.update));
    WatchHub* hub = nullptr;
    uint64_t id = 0;
    {
      absl::MutexLock lock(&mu_);
      EXPECT_FALSE(outstanding_) << "two writes in flight";
      EXPECT_FALSE(closed_.has_value()) << "a write after Close";
      outstanding_ = true;
      updates_.push_back(write.update);
      shared_.push_back(write.shared);
      if (auto_complete_ && hub_ != nullptr) {
        outstanding_ = false;
        hub = hub_;
        id = id_;
      }
    }
    if (hub != nullptr) hub->WriteDone(id, true);  // Before SendUpdate returns, as gRPC may.
  }

  void Close(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    EXPECT_FALSE(closed_.has_value()) << "closed twice";
    closed_ = status;
  }

  // Completes the outstanding write (the viewer took it).
  void Complete(bool ok = true) {
    WatchHub* hub = nullptr;
    uint64_t id = 0;
    {
      absl::MutexLock lock(&mu_);
      ASSERT_TRUE(outstanding_);
      outstanding_ = false;
      hub = hub_;
      id = id_;
    }
    hub->WriteDone(id, ok);
  }

  size_t count() const {
    absl::MutexLock lock(&mu_);
    return updates_.size();
  }
  std::shared_ptr<const v1::WatchUpdate> update(size_t i) const {
    absl::MutexLock lock(&mu_);
    return updates_.at(i);
  }
  // The shared payload bytes of update `i` (WatchWrite::shared).
  std::shared_ptr<const std::string> shared(size_t i) const {
    absl::MutexLock lock(&mu_);
    return shared_.at(i);
  }
  std::shared_ptr<const v1::WatchUpdate> last() const {
    absl::MutexLock lock(&mu_);
    return updates_.back();
  }
  std::optional<absl::Status> closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }
  bool outstanding() const {
    absl::MutexLock lock(&mu_);
    return outstanding_;
  }
  // Waits (real time) for `n` updates; for the test with the hub thread.
  bool WaitForCount(size_t n) const {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return updates_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
  }
  bool WaitForClose() const {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_.has_value(); };
    return mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(10));
  }

  // Applies every update received so far to a fresh WatchState.
  protocol::WatchState State() const {
    protocol::WatchState state;
    absl::MutexLock lock(&mu_);
    for (const auto& u : updates_) EXPECT_TRUE(state.Apply(*u).ok());
    return state;
  }

 private:
  const bool auto_complete_;
  mutable absl::Mutex mu_;
  WatchHub* hub_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t id_ ABSL_GUARDED_BY(mu_) = 0;
  bool outstanding_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::shared_ptr<const v1::WatchUpdate>> updates_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<const std::string>> shared_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> closed_ ABSL_GUARDED_BY(mu_);
};

class WatchHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = SessionManager::Create({}, &counters_);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  // Another manager. Call before MakeHub.
  void UseManager(SessionManagerOptions options) {
    auto m = SessionManager::Create(std::move(options), &counters_);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }
  // A manager whose sessions keep `steps` history points per layer. Call before MakeHub.
  void UseHistorySteps(size_t steps) {
    SessionManagerOptions o;
    o.session_limits.history_steps = steps;
    UseManager(o);
  }
  // The hub's preparations (an evicted session's or a job's snapshot) wait in preparations_
  // until RunPreparations(), instead of running at once (then one Poll() delivers them). Call
  // before MakeHub.
  void UseManualPreparation() { manual_preparation_ = true; }
  size_t RunPreparations() {
    std::vector<std::function<void()>> tasks;
    tasks.swap(preparations_);
    for (std::function<void()>& task : tasks) task();
    return tasks.size();
  }

  // The hub is destroyed before the sinks (members, in reverse order).
  WatchHub* MakeHub(absl::Duration grace = absl::Milliseconds(50)) {
    WatchHubOptions o;
    o.start_thread = false;
    o.clock = [this] { return now_; };
    o.shutdown_grace = grace;
    o.prepare = [this](std::function<void()> task) {
      if (manual_preparation_) {
        preparations_.push_back(std::move(task));
      } else {
        task();
      }
    };
    hub_ = std::make_unique<WatchHub>(manager_.get(), o);
    return hub_.get();
  }

  FakeSink& NewSink(bool auto_complete = false) {
    sinks_.push_back(std::make_unique<FakeSink>(auto_complete));
    return *sinks_.back();
  }

  // A session with `layers` declared layers and `steps` steps of events for all of them.
  SessionManager::Opened OpenSession(int layers, int steps, const std::string& job_id = "",
                                     int rank = 0) {
    auto opened = manager_->Open(MakeHello(job_id, rank), {});
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (!opened.ok()) return {};
    std::shared_ptr<Session> s = opened->session;
    EXPECT_TRUE(s->DeclareLayers(Table(layers)).ok());
    std::vector<uint32_t> all;
    for (int i = 0; i < layers; ++i) all.push_back(static_cast<uint32_t>(i));
    if (steps > 0) {
      EXPECT_EQ(s->AddBatchBytes(Batch(all, 0, steps).SerializeAsString()).value().rejected, 0u);
    }
    return *std::move(opened);
  }
  std::shared_ptr<Session> NewSession(int layers, int steps, const std::string& job_id = "",
                                      int rank = 0) {
    return OpenSession(layers, steps, job_id, rank).session;
  }

  // A session that ended and was released (its snapshot written when there is a data dir).
  std::string EndedSession(int layers, int steps) {
    SessionManager::Opened opened = OpenSession(layers, steps);
    if (opened.session == nullptr) return "";
    std::shared_ptr<Session> s = opened.session;
    s->Finish(protocol::End(), now_);
    manager_->Release(s, opened.attachment, /*ended=*/true);
    return s->id();
  }

  // Over `data_dir`, with one session held in memory: an ended session (2 layers, 3 steps) that a
  // newer, live one evicted (its snapshot on disk). Call before MakeHub.
  struct Evicted {
    std::string id;
    std::shared_ptr<Session> newer;
  };
  Evicted EvictedSession(const std::string& data_dir) {
    SessionManagerOptions o;
    o.data_dir = data_dir;
    o.max_sessions_in_memory = 1;
    UseManager(o);
    Evicted out;
    out.id = EndedSession(2, 3);
    out.newer = NewSession(2, 2);
    EXPECT_EQ(manager_->Find(out.id)->session, nullptr) << "not evicted";
    return out;
  }

  static v1::WatchRequest Request(const std::string& session, double interval_s = 0) {
    v1::WatchRequest r;
    r.mutable_session()->set_session_id(session);
    r.set_interval_s(interval_s);
    return r;
  }

  uint64_t Subscribe(WatchHub& hub, const v1::WatchRequest& request, FakeSink& sink) {
    absl::StatusOr<uint64_t> id = hub.Subscribe(request, &sink);
    EXPECT_TRUE(id.ok()) << id.status();
    sink.Attach(&hub, id.ok() ? *id : 0);
    return id.ok() ? *id : 0;
  }

  DaemonCounters counters_;
  std::unique_ptr<SessionManager> manager_;
  std::vector<std::unique_ptr<FakeSink>> sinks_;
  bool manual_preparation_ = false;
  std::vector<std::function<void()>> preparations_;
  std::unique_ptr<WatchHub> hub_;
  // On a tick of every interval used below.
  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
};

TEST_F(WatchHubTest, FirstUpdateIsTheFullStateAtOnce) {
  std::shared_ptr<Session> s = NewSession(3, 5);
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink();
  Subscribe(*hub, Request(s->id()), sink);
  now_ += absl::Milliseconds(123);  // Off-tick: the first update does not wait for a tick.
  hub->Poll();
  ASSERT_EQ(sink.count(), 1u);
  const v1::WatchUpdate& u = *sink.update(0);
  ASSERT_EQ(u.kind_case(), v1::WatchUpdate::kFull);
  EXPECT_EQ(u.sequence(), 1u);
  EXPECT_EQ(u.sent_unix_ns(), absl::ToUnixNanos(now_));
  EXPECT_GT(u.newest_event_unix_ns(), 0);
  EXPECT_TRUE(SameProto(u.full(), Wire(s->ToSnapshot())));
  EXPECT_EQ(u.full().record().layers_size(), 3);
  EXPECT_EQ(u.full().history_size(), 3);
  EXPECT_EQ(hub->stats().watchers, 1u);
  EXPECT_EQ(hub->stats().updates_sent, 1u);
}

TEST_F(WatchHubTest, LatestResolvesToTheNewestSessionAtSubscribe) {
  std::shared_ptr<Session> a = NewSession(1, 1);
  std::shared_ptr<Session> b = NewSession(2, 1);
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink();
  Subscribe(*hub, Request("latest"), sink);
  std::shared_ptr<Session> c = NewSession(3, 1);  // Started after: not this viewer's.
  hub->Poll();
  ASSERT_EQ(sink.count(), 1u);
  EXPECT_EQ(sink.update(0)->full().session().session_id(), b->id());
}

TEST_F(WatchHubTest, BadRequestsAreRefused) {
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink();
  EXPECT_EQ(hub->Subscribe(v1::WatchRequest(), &sink).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hub->Subscribe(Request(""), &sink).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hub->Subscribe(Request("latest"), &sink).status().code(),
            absl::StatusCode::kNotFound);  // No sessions yet.
  std::shared_ptr<Session> s = NewSession(1, 1);
  EXPECT_EQ(hub->Subscribe(Request("no-such-session"), &sink).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(hub->Subscribe(Request(s->id(), -1), &sink).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hub->Subscribe(Request(s->id(), std::nan("")), &sink).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hub->Subscribe(Request(s->id(), std::numeric_limits<double>::infinity()), &sink)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  v1::WatchRequest job;
  job.set_job_id("");
  EXPECT_EQ(hub->Subscribe(job, &sink).status().code(), absl::StatusCode::kInvalidArgument);
  job.set_job_id("no-such-job");
  EXPECT_EQ(hub->Subscribe(job, &sink).status().code(), absl::StatusCode::kNotFound);
  hub->Poll();
  EXPECT_EQ(sink.count(), 0u);
  EXPECT_EQ(hub->stats().watchers, 0u);
}

TEST_F(WatchHubTest, NothingChangedNothingSent) {
  std::shared_ptr<Session> s = NewSession(3, 5);
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(s->id(), 0.1), sink);
  hub->Poll();
  for (int i = 0; i < 5; ++i) {
    now_ += absl::Milliseconds(100);
    hub->Poll();
  }
  EXPECT_EQ(sink.count(), 1u);
  s->AddBatchBytes(Batch({0}, 5, 1).SerializeAsString()).value();
  now_ += absl::Milliseconds(100);
  hub->Poll();
  EXPECT_EQ(sink.count(), 2u);
}

TEST_F(WatchHubTest, DeltaCarriesOnlyWhatChangedAndAppliesToTheSameState) {
  std::shared_ptr<Session> s = NewSession(6, 40);  // History makes a full large.
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(s->id(), 0.1), sink);
  hub->Poll();
  ASSERT_EQ(sink.count(), 1u);

  s->AddBatchBytes(Batch({2}, 40, 1).SerializeAsString()).value();  // Only layer 2.
  now_ += absl::Milliseconds(100);
  hub->Poll();
  ASSERT_EQ(sink.count(), 2u);
  const v1::WatchUpdate& u = *sink.update(1);
  ASSERT_EQ(u.kind_case(), v1::WatchUpdate::kDelta);
  EXPECT_EQ(u.sequence(), 2u);
  ASSERT_EQ(u.delta().record().layers_size(), 1);
  EXPECT_EQ(u.delta().record().layers(0).full_name(), "net.l2");
  ASSERT_EQ(u.delta().history_size(), 1);
  EXPECT_EQ(u.delta().history(0).full_name(), "net.l2");
  EXPECT_TRUE(u.delta().history(0).append());  // Only the new point, not the 41.
  ASSERT_EQ(u.delta().history(0).steps_size(), 1);
  EXPECT_EQ(u.delta().history(0).steps(0), 40u);
  EXPECT_EQ(u.delta().session().events(), s->Info().events);  // Always complete.
  EXPECT_TRUE(u.delta().record().has_metadata());
  EXPECT_LT(u.ByteSizeLong(), sink.update(0)->ByteSizeLong() / 3);

  // A new layer appears (declared and seen after the viewer's state): appended, still a delta.
  std::vector<protocol::LayerDecl> more = Table(7);
  ASSERT_TRUE(s->DeclareLayers(more).ok());
  s->AddBatchBytes(Batch({6}, 41, 1).SerializeAsString()).value();
  now_ += absl::Milliseconds(100);
  hub->Poll();
  ASSERT_EQ(sink.count(), 3u);
  ASSERT_EQ(sink.update(2)->kind_case(), v1::WatchUpdate::kDelta);
  ASSERT_EQ(sink.update(2)->delta().history_size(), 1);
  EXPECT_EQ(sink.update(2)->delta().history(0).full_name(), "net.l6");
  EXPECT_FALSE(sink.update(2)->delta().history(0).append());  // New to the viewer: whole.

  const protocol::WatchState state = sink.State();
  ASSERT_TRUE(state.has_snapshot());
  EXPECT_TRUE(SameProto(state.snapshot(), Wire(s->ToSnapshot())));
}

TEST_F(WatchHubTest, StreamingLayersSendOnlyTheirNewPoints) {
  std::shared_ptr<Session> s = NewSession(6, 40);
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(s->id(), 0.1), sink);
  hub->Poll();
  ASSERT_EQ(sink.count(), 1u);
  size_t full_history_bytes = 0;
  for (const v1::LayerHistory& h : sink.update(0)->full().history()) {
    full_history_bytes += h.ByteSizeLong();
  }

  // Every layer streams two steps between ticks: each history entry carries those two points.
  s->AddBatchBytes(Batch({0, 1, 2, 3, 4, 5}, 40, 2).SerializeAsString()).value();
  now_ += absl::Milliseconds(100);
  hub->Poll();
  ASSERT_EQ(sink.count(), 2u);
  const v1::WatchUpdate& u = *sink.update(1);
  ASSERT_EQ(u.kind_case(), v1::WatchUpdate::kDelta);
  ASSERT_EQ(u.delta().history_size(), 6);
  size_t delta_history_bytes = 0;
  for (const v1::LayerHistory& h : u.delta().history()) {
    EXPECT_TRUE(h.append()) << h.full_name();
    ASSERT_EQ(h.steps_size(), 2) << h.full_name();
    EXPECT_EQ(h.steps(0), 40u);
    EXPECT_EQ(h.steps(1), 41u);
    EXPECT_EQ(h.latency_ms_size(), 2);
    EXPECT_EQ(h.output_std_size(), 2);
    EXPECT_EQ(h.grad_norm_size(), 2);
    EXPECT_EQ(h.non_finite_size(), 2);
    EXPECT_DOUBLE_EQ(h.grad_norm(1), 42.0);
    delta_history_bytes += h.ByteSizeLong();
  }
  EXPECT_LT(delta_history_bytes * 10, full_history_bytes);
  EXPECT_TRUE(SameProto(sink.State().snapshot(), Wire(s->ToSnapshot())));

  // A late event for step 40 of one layer (still in reach) changes a point the viewer holds: the
  // entry starts there and carries what follows it.
  v1::EventBatch late;
  v1::BackwardEvent* g = late.add_backward();
  g->set_layer_id(3);
  g->set_step(40);
  g->set_grad_norm(-7.0);
  g->set_grad_has_nan(true);
  ASSERT_EQ(s->AddBatchBytes(late.SerializeAsString()).value().accepted, 1u);
  now_ += absl::Milliseconds(100);
  hub->Poll();
  ASSERT_EQ(sink.count(), 3u);
  const v1::WatchUpdate& v = *sink.update(2);
  ASSERT_EQ(v.kind_case(), v1::WatchUpdate::kDelta);
  ASSERT_EQ(v.delta().history_size(), 1);
  const v1::LayerHistory& h = v.delta().history(0);
  EXPECT_EQ(h.full_name(), "net.l3");
  EXPECT_TRUE(h.append());
  ASSERT_EQ(h.steps_size(), 2);
  EXPECT_EQ(h.steps(0), 40u);
  EXPECT_DOUBLE_EQ(h.grad_norm(0), -7.0);
  EXPECT_TRUE(h.non_finite(0));
  EXPECT_TRUE(SameProto(sink.State().snapshot(), Wire(s->ToSnapshot())));
}

// A history thinned once since the viewer's copy is sent as an append with thin_before_step (the
// viewer replays the thinning); thinned twice or more (several steps at once, or a slow viewer's
// coalesced gap), whole. Either way every viewer's copy stays exactly the session's.
TEST_F(WatchHubTest, ThinnedHistoryIsReplayedOrSentWholeAndEveryViewerStaysExact) {
  UseHistorySteps(8);  // Thinned every other step.
  std::shared_ptr<Session> s = NewSession(3, 5);
  WatchHub* hub = MakeHub();
  FakeSink& fast = NewSink(/*auto_complete=*/true);
  FakeSink& slow = NewSink();  // Takes a write every third tick: coalesced in between.
  FakeSink& late = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(s->id(), 0.05), fast);
  Subscribe(*hub, Request(s->id(), 0.05), slow);
  hub->Poll();

  // Layer 0's history as the session keeps it (same capacity, stagger and steps), to count its
  // thinnings.
  LayerHistory mirror(8, LayerHistory::Stagger(0, 8));
  for (uint64_t step = 0; step < 5; ++step) mirror.RecordForward(step, 1.0, 1.0, false);
  auto history_steps = [&](int layer) {
    const v1::Snapshot snapshot = Wire(s->ToSnapshot());  // Outlives the loop over its field.
    const auto& field = snapshot.history(layer).steps();
    return std::vector<uint64_t>(field.begin(), field.end());
  };
  auto find_l0 = [](const v1::WatchUpdate& u) -> const v1::LayerHistory* {
    for (const v1::LayerHistory& h : u.delta().history()) {
      if (h.full_name() == "net.l0") return &h;
    }
    return nullptr;
  };
  int appended = 0;
  int thin_appended = 0;
  int replaced = 0;
  int slow_thin_appended = 0;
  int slow_replaced = 0;
  uint64_t slow_thinnings = mirror.thinnings();  // At the state of slow's latest update.
  size_t slow_count = slow.count();
  int step = 5;
  for (int tick = 1; tick <= 40; ++tick) {
    // Layer 0 streams (one, two or four steps a tick), layer 1 now and then, layer 2 never.
    const int steps = tick % 10 == 0 ? 4 : tick % 4 == 0 ? 2 : 1;
    const uint64_t thinnings_before = mirror.thinnings();
    s->AddBatchBytes(Batch({0}, step, steps).SerializeAsString()).value();
    for (int i = 0; i < steps; ++i) {
      mirror.RecordForward(static_cast<uint64_t>(step + i), 1.0, 1.0, false);
    }
    if (tick % 5 == 0) s->AddBatchBytes(Batch({1}, step, 1).SerializeAsString()).value();
    step += steps;
    const uint64_t thinned = mirror.thinnings() - thinnings_before;
    const std::vector<uint64_t> after = history_steps(0);
    ASSERT_EQ(after.size(), mirror.points().size());
    if (tick == 15) Subscribe(*hub, Request(s->id(), 0.05), late);
    if (tick % 3 == 0) slow.Complete();
    now_ += absl::Milliseconds(50);
    hub->Poll();

    ASSERT_EQ(fast.count(), static_cast<size_t>(tick + 1));
    const v1::WatchUpdate& u = *fast.last();
    ASSERT_EQ(u.kind_case(), v1::WatchUpdate::kDelta) << "tick " << tick;
    for (const v1::LayerHistory& h : u.delta().history()) {
      EXPECT_NE(h.full_name(), "net.l2");  // Unchanged: not sent.
    }
    const v1::LayerHistory* h0 = find_l0(u);
    ASSERT_NE(h0, nullptr) << "tick " << tick;
    if (thinned >= 2) {  // Four steps in one batch: the whole history.
      ++replaced;
      EXPECT_FALSE(h0->append()) << "tick " << tick;
      EXPECT_EQ(h0->thin_before_step(), 0u);
      EXPECT_EQ(h0->steps_size(), static_cast<int>(after.size()));
    } else {
      // Only the new points, after the thinning when there was one (never the whole history).
      EXPECT_TRUE(h0->append()) << "tick " << tick;
      EXPECT_EQ(h0->thin_before_step(), thinned == 1 ? mirror.thin_boundary() : 0u)
          << "tick " << tick;
      ASSERT_EQ(h0->steps_size(), steps) << "tick " << tick;
      EXPECT_LT(h0->steps_size(), static_cast<int>(after.size()));
      EXPECT_EQ(h0->steps(0), after[after.size() - static_cast<size_t>(steps)]);
      ++(thinned == 1 ? thin_appended : appended);
    }
    EXPECT_TRUE(SameProto(fast.State().snapshot(), Wire(s->ToSnapshot()))) << "tick " << tick;

    // The slow viewer: one thinning since its previous update is replayed, more are sent whole.
    if (slow.count() > slow_count) {
      slow_count = slow.count();
      const v1::WatchUpdate& w = *slow.last();
      const uint64_t gap = mirror.thinnings() - slow_thinnings;
      slow_thinnings = mirror.thinnings();
      ASSERT_EQ(w.kind_case(), v1::WatchUpdate::kDelta) << "tick " << tick;
      const v1::LayerHistory* w0 = find_l0(w);
      ASSERT_NE(w0, nullptr) << "tick " << tick;
      EXPECT_EQ(w0->append(), gap < 2) << "tick " << tick;
      EXPECT_EQ(w0->thin_before_step(), gap == 1 ? mirror.thin_boundary() : 0u) << "tick " << tick;
      if (gap >= 2) ++slow_replaced;
      if (gap == 1) ++slow_thin_appended;
      EXPECT_TRUE(SameProto(slow.State().snapshot(), Wire(s->ToSnapshot()))) << "tick " << tick;
    }
  }
  EXPECT_GT(appended, 5);
  EXPECT_GT(thin_appended, 10);
  EXPECT_EQ(replaced, 4);
  EXPECT_GT(slow_replaced, 3);
  EXPECT_GT(slow_thin_appended, 0);

  // An event for a step out of reach changes the layer but no history point: no history entry.
  v1::EventBatch old;
  v1::BackwardEvent* g = old.add_backward();
  g->set_layer_id(0);
  g->set_step(1);
  g->set_grad_norm(3.0);
  ASSERT_EQ(s->AddBatchBytes(old.SerializeAsString()).value().accepted, 1u);
  slow.Complete();
  now_ += absl::Milliseconds(50);
  hub->Poll();
  const v1::WatchUpdate& u = *fast.last();
  ASSERT_EQ(u.kind_case(), v1::WatchUpdate::kDelta);
  EXPECT_EQ(u.delta().record().layers_size(), 1);
  EXPECT_EQ(u.delta().history_size(), 0);

  // Whatever each viewer was sent (full, deltas across thinnings, coalesced states), applying it
  // gives the session's state.
  const v1::Snapshot want = Wire(s->ToSnapshot());
  EXPECT_GT(hub->stats().updates_coalesced, 0u);
  EXPECT_GT(slow.count(), 5u);
  for (FakeSink* sink : {&fast, &slow, &late}) {
    EXPECT_TRUE(SameProto(sink->State().snapshot(), want));
  }
}

TEST_F(WatchHubTest, FullWhenTheDeltaWouldNotBeSmaller) {
  std::shared_ptr<Session> s = NewSession(4, 0);  // Declared, no events: no history yet.
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(s->id(), 0.1), sink);
  hub->Poll();
  // Every layer changed and every history is new: the delta would be the full.
  s->AddBatchBytes(Batch({0, 1, 2, 3}, 0, 1).SerializeAsString()).value();
  now_ += absl::Milliseconds(100);
  hub->Poll();
  ASSERT_EQ(sink.count(), 2u);
  EXPECT_EQ(sink.update(1)->kind_case(), v1::WatchUpdate::kFull);
  EXPECT_TRUE(SameProto(sink.update(1)->full(), Wire(s->ToSnapshot())));
}

TEST_F(WatchHubTest, UpdatesFollowTheIntervalTicks) {
  std::shared_ptr<Session> s = NewSession(2, 1);
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(s->id(), 0.2), sink);
  hub->Poll();  // t = 0: the first update.
  ASSERT_EQ(sink.count(), 1u);
  // Something changes every 50 ms; updates go out only on the 200 ms ticks.
  std::vector<int> sent_at_ms;
  for (int ms = 50; ms <= 1000; ms += 50) {
    now_ += absl::Milliseconds(50);
    s->AddBatchBytes(Batch({0}, 1 + ms, 1).SerializeAsString()).value();
    const size_t before = sink.count();
    const absl::Time next = hub->Poll();
    if (sink.count() > before) sent_at_ms.push_back(ms);
    EXPECT_GT(next, now_);
    EXPECT_LE(next, now_ + absl::Milliseconds(200));
  }
  EXPECT_EQ(sent_at_ms, (std::vector<int>{200, 400, 600, 800, 1000}));
}

TEST_F(WatchHubTest, IntervalsBelowTheMinimumAreRaisedToIt) {
  std::shared_ptr<Session> s = NewSession(2, 1);
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(s->id(), 0.001), sink);  // 1 ms asked: 50 ms given.
  hub->Poll();
  int sent = 0;
  for (int ms = 10; ms <= 200; ms += 10) {
    now_ += absl::Milliseconds(10);
    s->AddBatchBytes(Batch({1}, 1 + ms, 1).SerializeAsString()).value();
    const size_t before = sink.count();
    hub->Poll();
    sent += static_cast<int>(sink.count() - before);
  }
  EXPECT_EQ(sent, 4);  // At 50, 100, 150, 200 ms.
}

TEST_F(WatchHubTest, DefaultIntervalIsHalfASecond) {
  std::shared_ptr<Session> s = NewSession(2, 1);
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(s->id()), sink);
  hub->Poll();
  now_ += absl::Milliseconds(100);
  s->AddBatchBytes(Batch({1}, 5, 1).SerializeAsString()).value();
  EXPECT_EQ(hub->Poll(), now_ + absl::Milliseconds(400));
  now_ += absl::Milliseconds(400);
  hub->Poll();
  EXPECT_EQ(sink.count(), 2u);
}

TEST_F(WatchHubTest, StalledViewerIsCoalescedToTheNewestAndDelaysNoOne) {
  std::shared_ptr<Session> s = NewSession(3, 5);
  WatchHub* hub = MakeHub();
  FakeSink& fast = NewSink(/*auto_complete=*/true);
  FakeSink& stalled = NewSink();  // Takes its first update and never completes the write.
  Subscribe(*hub, Request(s->id(), 0.1), fast);
  Subscribe(*hub, Request(s->id(), 0.1), stalled);
  hub->Poll();
  ASSERT_EQ(fast.count(), 1u);
  ASSERT_EQ(stalled.count(), 1u);
  ASSERT_TRUE(stalled.outstanding());

  for (int i = 0; i < 5; ++i) {
    s->AddBatchBytes(Batch({static_cast<uint32_t>(i % 3)}, 5 + i, 1).SerializeAsString()).value();
    now_ += absl::Milliseconds(100);
    hub->Poll();
  }
  EXPECT_EQ(fast.count(), 6u);     // Every tick.
  EXPECT_EQ(stalled.count(), 1u);  // Nothing queued behind the stalled write.
  // Five states became due; one waits, four were replaced.
  EXPECT_EQ(hub->stats().updates_coalesced, 4u);

  s->AddBatchBytes(Batch({0}, 20, 1).SerializeAsString()).value();  // Newer still, between ticks.
  stalled.Complete();
  hub->Poll();  // No tick due: the waiting state goes now, built from the newest.
  ASSERT_EQ(stalled.count(), 2u);
  const v1::WatchUpdate& u = *stalled.last();
  EXPECT_EQ(u.sequence(), 6u);  // 2..5 were skipped: the gap shows the coalesced states.
  const protocol::WatchState state = stalled.State();
  EXPECT_TRUE(SameProto(state.snapshot(), Wire(s->ToSnapshot())));

  // Back to its ticks: nothing more before the next one.
  stalled.Complete();
  s->AddBatchBytes(Batch({1}, 21, 1).SerializeAsString()).value();
  now_ += absl::Milliseconds(10);
  hub->Poll();
  EXPECT_EQ(stalled.count(), 2u);
}

TEST_F(WatchHubTest, ViewersOfTheSameStateShareOnePayload) {
  std::shared_ptr<Session> s = NewSession(3, 30);
  WatchHub* hub = MakeHub();
  std::vector<FakeSink*> sinks;
  for (int i = 0; i < 8; ++i) {
    sinks.push_back(&NewSink(/*auto_complete=*/true));
    Subscribe(*hub, Request(s->id(), 0.1), *sinks.back());
  }
  hub->Poll();
  s->AddBatchBytes(Batch({1}, 30, 1).SerializeAsString()).value();
  now_ += absl::Milliseconds(100);
  hub->Poll();
  for (const auto& sink : sinks) {
    ASSERT_EQ(sink->count(), 2u);
    // The same Snapshot object, not copies (only the sequence and times are per viewer).
    EXPECT_EQ(&sink->update(0)->full(), &sinks[0]->update(0)->full());
    ASSERT_EQ(sink->update(1)->kind_case(), v1::WatchUpdate::kDelta);
    EXPECT_EQ(&sink->update(1)->delta(), &sinks[0]->update(1)->delta());
    EXPECT_EQ(sink->update(1)->sequence(), 2u);
    // And serialized once: the same bytes, written by every viewer's stream.
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_NE(sink->shared(i), nullptr);
      EXPECT_EQ(sink->shared(i), sinks[0]->shared(i));
    }
  }
}

TEST_F(WatchHubTest, SessionsTickApartAndTheViewersOfOneSessionTogether) {
  // Three sessions, two viewers each, all at the minimum interval (50 ms).
  std::vector<std::shared_ptr<Session>> sessions;
  for (int i = 0; i < 3; ++i) sessions.push_back(NewSession(2, 1));
  WatchHub* hub = MakeHub();
  std::vector<std::vector<FakeSink*>> sinks(3);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) {
      sinks[i].push_back(&NewSink(/*auto_complete=*/true));
      Subscribe(*hub, Request(sessions[i]->id(), 0.05), *sinks[i].back());
    }
  }
  hub->Poll();  // Every first state at once.
  for (auto& s : sessions) s->AddBatchBytes(Batch({1}, 5, 1).SerializeAsString()).value();
  // Passes every millisecond for two intervals: when each viewer's second update went out.
  std::vector<std::vector<absl::Duration>> sent_at(3, std::vector<absl::Duration>(2));
  const absl::Time start = now_;
  for (int ms = 1; ms <= 100; ++ms) {
    now_ = start + absl::Milliseconds(ms);
    hub->Poll();
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 2; ++j) {
        if (sinks[i][j]->count() == 2 && sent_at[i][j] == absl::ZeroDuration()) {
          sent_at[i][j] = now_ - start;
        }
      }
    }
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(sinks[i][0]->count(), 2u) << i;
    ASSERT_EQ(sinks[i][1]->count(), 2u) << i;
    // One session's viewers: the same pass, one shared delta.
    EXPECT_EQ(sent_at[i][0], sent_at[i][1]) << i;
    ASSERT_EQ(sinks[i][0]->update(1)->kind_case(), v1::WatchUpdate::kDelta);
    EXPECT_EQ(&sinks[i][0]->update(1)->delta(), &sinks[i][1]->update(1)->delta()) << i;
  }
  // Phases 0, 30.9 and 11.8 ms: each a whole interval after the first states, apart from the
  // others.
  EXPECT_EQ(sent_at[0][0], absl::Milliseconds(50));
  EXPECT_EQ(sent_at[1][0], absl::Milliseconds(81));
  EXPECT_EQ(sent_at[2][0], absl::Milliseconds(62));
}

TEST_F(WatchHubTest, SessionEndSendsFinalFullThenEndedThenCloses) {
  std::shared_ptr<Session> s = NewSession(6, 20);
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink();
  Subscribe(*hub, Request(s->id(), 0.1), sink);
  hub->Poll();
  sink.Complete();
  s->AddBatchBytes(Batch({0}, 20, 1).SerializeAsString())
      .value();  // Small change: would be a delta...
  protocol::End end;
  end.total_time_ms = 42;
  s->Finish(end, now_);
  now_ += absl::Milliseconds(100);
  hub->Poll();
  ASSERT_EQ(sink.count(), 2u);
  ASSERT_EQ(sink.update(1)->kind_case(), v1::WatchUpdate::kFull);  // ...but the final is full.
  EXPECT_EQ(sink.update(1)->full().session().state(), v1::SESSION_STATE_FINISHED);
  EXPECT_TRUE(SameProto(sink.update(1)->full(), Wire(s->ToSnapshot())));
  hub->Poll();  // Nothing while the final state is being written.
  EXPECT_EQ(sink.count(), 2u);
  sink.Complete();
  hub->Poll();
  ASSERT_EQ(sink.count(), 3u);
  ASSERT_EQ(sink.update(2)->kind_case(), v1::WatchUpdate::kSessionEnded);
  EXPECT_EQ(sink.update(2)->session_ended().session_id(), s->id());
  EXPECT_EQ(sink.update(2)->session_ended().state(), v1::SESSION_STATE_FINISHED);
  EXPECT_EQ(sink.update(2)->sequence(), 3u);
  EXPECT_FALSE(sink.closed().has_value());
  sink.Complete();
  hub->Poll();
  ASSERT_TRUE(sink.closed().has_value());
  EXPECT_TRUE(sink.closed()->ok()) << *sink.closed();
  EXPECT_EQ(hub->stats().watchers, 0u);
}

TEST_F(WatchHubTest, AbortedSessionEndsTheStreamToo) {
  std::shared_ptr<Session> s = NewSession(2, 2);
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(s->id(), 0.1), sink);
  hub->Poll();
  s->Abort(now_);
  now_ += absl::Milliseconds(100);
  hub->Poll();  // Final full; its write completes at once...
  hub->Poll();  // ...session_ended...
  hub->Poll();  // ...close.
  ASSERT_EQ(sink.count(), 3u);
  EXPECT_EQ(sink.update(1)->full().session().state(), v1::SESSION_STATE_ABORTED);
  EXPECT_EQ(sink.update(2)->session_ended().state(), v1::SESSION_STATE_ABORTED);
  ASSERT_TRUE(sink.closed().has_value());
  EXPECT_TRUE(sink.closed()->ok());
}

TEST_F(WatchHubTest, AnEndedSessionGetsItsStateThenTheEnd) {
  std::shared_ptr<Session> s = NewSession(2, 2);
  s->Finish(protocol::End(), now_);
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(s->id()), sink);
  hub->Poll();
  hub->Poll();
  hub->Poll();
  ASSERT_EQ(sink.count(), 2u);
  EXPECT_EQ(sink.update(0)->kind_case(), v1::WatchUpdate::kFull);
  EXPECT_EQ(sink.update(1)->kind_case(), v1::WatchUpdate::kSessionEnded);
  ASSERT_TRUE(sink.closed().has_value());
  EXPECT_TRUE(sink.closed()->ok());
}

TEST_F(WatchHubTest, ShutdownReachesEveryViewerAndEndsStalledOnes) {
  std::shared_ptr<Session> s = NewSession(2, 2);
  WatchHub* hub = MakeHub(/*grace=*/absl::Milliseconds(50));
  FakeSink& fast = NewSink(/*auto_complete=*/true);
  FakeSink& stalled = NewSink();
  Subscribe(*hub, Request(s->id(), 0.1), fast);
  Subscribe(*hub, Request(s->id(), 0.1), stalled);
  hub->Poll();
  EXPECT_EQ(hub->stats().watchers, 2u);
  hub->Shutdown();
  ASSERT_EQ(fast.count(), 2u);
  EXPECT_EQ(fast.update(1)->kind_case(), v1::WatchUpdate::kShutdown);
  EXPECT_EQ(fast.update(1)->sequence(), 2u);
  ASSERT_TRUE(fast.closed().has_value());
  EXPECT_TRUE(fast.closed()->ok());
  // The stalled viewer could not take `shutdown`: closed anyway, after the grace period.
  EXPECT_EQ(stalled.count(), 1u);
  ASSERT_TRUE(stalled.closed().has_value());
  EXPECT_EQ(stalled.closed()->code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(hub->stats().watchers, 0u);
  FakeSink& late = NewSink();
  EXPECT_EQ(hub->Subscribe(Request(s->id()), &late).status().code(),
            absl::StatusCode::kUnavailable);
  hub->Shutdown();  // Idempotent.
}

TEST_F(WatchHubTest, ShutdownWaitsForAViewerThatTakesItInTime) {
  std::shared_ptr<Session> s = NewSession(2, 2);
  WatchHub* hub = MakeHub(/*grace=*/absl::Seconds(10));
  FakeSink& slow = NewSink();
  Subscribe(*hub, Request(s->id(), 0.1), slow);
  hub->Poll();
  std::thread viewer([&] {
    // Takes the first update, then the shutdown, a little later each.
    slow.Complete();
    ASSERT_TRUE(slow.WaitForCount(2));
    slow.Complete();
  });
  hub->Shutdown();
  viewer.join();
  ASSERT_EQ(slow.count(), 2u);
  EXPECT_EQ(slow.update(1)->kind_case(), v1::WatchUpdate::kShutdown);
  ASSERT_TRUE(slow.closed().has_value());
  EXPECT_TRUE(slow.closed()->ok());
}

TEST_F(WatchHubTest, CancelledOrBrokenViewersAreClosedAndForgotten) {
  std::shared_ptr<Session> s = NewSession(2, 2);
  WatchHub* hub = MakeHub();
  FakeSink& cancelled = NewSink();
  FakeSink& broken = NewSink();
  const uint64_t a = Subscribe(*hub, Request(s->id(), 0.1), cancelled);
  Subscribe(*hub, Request(s->id(), 0.1), broken);
  hub->Poll();
  hub->Cancel(a);
  hub->Poll();  // Its write is still outstanding: not closed yet.
  EXPECT_FALSE(cancelled.closed().has_value());
  cancelled.Complete(/*ok=*/false);
  broken.Complete(/*ok=*/false);
  hub->Poll();
  ASSERT_TRUE(cancelled.closed().has_value());
  EXPECT_EQ(cancelled.closed()->code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE(broken.closed().has_value());
  EXPECT_EQ(broken.closed()->code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(hub->stats().watchers, 0u);
  hub->Remove(a);
  hub->Remove(a);           // Unknown by now: ignored.
  hub->WriteDone(a, true);  // Ignored.
  hub->Poll();
}

TEST_F(WatchHubTest, JobWatchSendsTheWholeJobUntilEveryRankEnded) {
  std::shared_ptr<Session> r0 = NewSession(2, 3, "job-7", 0);
  std::shared_ptr<Session> r1 = NewSession(2, 3, "job-7", 1);
  NewSession(2, 3);  // Another, job-less session.
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  v1::WatchRequest request;
  request.set_job_id("job-7");
  request.set_interval_s(0.1);
  Subscribe(*hub, request, sink);
  hub->Poll();
  ASSERT_EQ(sink.count(), 1u);
  ASSERT_EQ(sink.update(0)->kind_case(), v1::WatchUpdate::kJob);
  EXPECT_EQ(sink.update(0)->job().job_id(), "job-7");
  ASSERT_EQ(sink.update(0)->job().ranks_size(), 2);
  EXPECT_GT(sink.update(0)->newest_event_unix_ns(), 0);

  now_ += absl::Milliseconds(100);
  hub->Poll();
  EXPECT_EQ(sink.count(), 1u);  // Nothing changed.

  r1->AddBatchBytes(Batch({0}, 3, 1).SerializeAsString()).value();
  r0->Finish(protocol::End(), now_);
  now_ += absl::Milliseconds(100);
  hub->Poll();
  ASSERT_EQ(sink.count(), 2u);
  EXPECT_EQ(sink.update(1)->kind_case(), v1::WatchUpdate::kJob);
  EXPECT_FALSE(sink.closed().has_value());

  r1->Finish(protocol::End(), now_ + absl::Milliseconds(1));
  now_ += absl::Milliseconds(100);
  hub->Poll();  // The final job...
  hub->Poll();  // ...then the end (the rank that ended last)...
  hub->Poll();  // ...then close.
  ASSERT_EQ(sink.count(), 4u);
  EXPECT_EQ(sink.update(2)->kind_case(), v1::WatchUpdate::kJob);
  ASSERT_EQ(sink.update(3)->kind_case(), v1::WatchUpdate::kSessionEnded);
  EXPECT_EQ(sink.update(3)->session_ended().session_id(), r1->id());
  ASSERT_TRUE(sink.closed().has_value());
  EXPECT_TRUE(sink.closed()->ok());
}

TEST_F(WatchHubTest, TheHubThreadDeliversWithoutPolling) {
  std::shared_ptr<Session> s = NewSession(2, 2);
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  hub_ = std::make_unique<WatchHub>(manager_.get(), WatchHubOptions());  // Real clock, a thread.
  WatchHub& hub = *hub_;
  Subscribe(hub, Request(s->id(), 0.05), sink);
  ASSERT_TRUE(sink.WaitForCount(1));
  s->AddBatchBytes(Batch({0}, 2, 1).SerializeAsString()).value();
  ASSERT_TRUE(sink.WaitForCount(2));  // At the next 50 ms tick.
  s->Finish(protocol::End(), absl::Now());
  ASSERT_TRUE(sink.WaitForCount(4));  // Final full, session_ended.
  ASSERT_TRUE(sink.WaitForClose());
  EXPECT_EQ(sink.update(3)->kind_case(), v1::WatchUpdate::kSessionEnded);
  EXPECT_TRUE(sink.closed()->ok());
}

// ---- Preparation off the hub thread -------------------------------------------------------------

TEST_F(WatchHubTest, AnEvictedSessionIsReadOffTheHubThreadOnceForAllItsViewers) {
  test_util::TempDir dir{"tthub"};
  const auto [old, live] = EvictedSession(dir.path());
  UseManualPreparation();
  WatchHub* hub = MakeHub();
  FakeSink& a = NewSink(/*auto_complete=*/true);
  FakeSink& b = NewSink(/*auto_complete=*/true);
  FakeSink& other = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(old), a);
  Subscribe(*hub, Request(old), b);
  Subscribe(*hub, Request(live->id()), other);
  hub->Poll();
  // The file is not read on the hub thread: its viewers wait, the others are served.
  EXPECT_EQ(other.count(), 1u);
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(b.count(), 0u);
  EXPECT_EQ(preparations_.size(), 1u);  // One read for both viewers.
  hub->Poll();
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(preparations_.size(), 1u);  // Still in flight: not asked again.

  EXPECT_EQ(RunPreparations(), 1u);
  hub->Poll();  // Taken back: the last state...
  hub->Poll();  // ...session_ended...
  hub->Poll();  // ...close.
  for (FakeSink* sink : {&a, &b}) {
    ASSERT_EQ(sink->count(), 2u);
    const v1::WatchUpdate& u = *sink->update(0);
    ASSERT_EQ(u.kind_case(), v1::WatchUpdate::kFull);
    EXPECT_EQ(u.sequence(), 1u);
    EXPECT_EQ(u.full().session().session_id(), old);
    EXPECT_EQ(u.full().session().state(), v1::SESSION_STATE_FINISHED);
    EXPECT_EQ(u.full().record().layers_size(), 2);
    EXPECT_EQ(u.full().history_size(), 0);       // Not kept on disk.
    EXPECT_EQ(&u.full(), &a.update(0)->full());  // One snapshot, shared.
    ASSERT_EQ(sink->update(1)->kind_case(), v1::WatchUpdate::kSessionEnded);
    EXPECT_EQ(sink->update(1)->session_ended().session_id(), old);
    ASSERT_TRUE(sink->closed().has_value());
    EXPECT_TRUE(sink->closed()->ok()) << *sink->closed();
  }
  EXPECT_TRUE(preparations_.empty());
}

TEST_F(WatchHubTest, AnEvictedSessionWhoseFileIsGoneClosesItsViewersWithTheError) {
  test_util::TempDir dir{"tthub"};
  const std::string old = EvictedSession(dir.path()).id;
  ASSERT_TRUE(std::filesystem::remove(manager_->SnapshotPath(old)));
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(old), sink);
  hub->Poll();
  EXPECT_EQ(sink.count(), 0u);
  ASSERT_TRUE(sink.closed().has_value());
  EXPECT_EQ(sink.closed()->code(), absl::StatusCode::kNotFound) << *sink.closed();
  EXPECT_EQ(hub->stats().watchers, 0u);
}

// A restarted daemon loads an interrupted session as aborted (not in memory); a viewer subscribes
// to it, and its agent resumes it before the viewer's state is read. The viewer then follows the
// live session: no session_ended (which said "live" and ended the view as if the session had
// finished: cli_e2e_watch_terminal's flake after a daemon stop/start).
TEST_F(WatchHubTest, AViewerOfAnInterruptedSessionFollowsItWhenItsAgentResumesIt) {
  test_util::TempDir dir{"tthub"};
  SessionManagerOptions o;
  o.data_dir = dir.path();
  UseManager(o);
  std::string id;
  {
    SessionManager::Opened opened = OpenSession(2, 3);
    id = opened.session->id();
    manager_->Release(opened.session, opened.attachment, /*ended=*/false);  // Interrupted.
    manager_->Shutdown();
    manager_.reset();
  }
  UseManager(o);  // The restart.
  ASSERT_EQ(manager_->Find(id)->session, nullptr);
  UseManualPreparation();
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  Subscribe(*hub, Request(id, 0.5), sink);
  hub->Poll();  // The state is being read...
  protocol::Hello hello = MakeHello();
  hello.resume_session_id = id;
  auto resumed = manager_->Open(hello, {});  // ... when the agent resumes the session.
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE(resumed->resumed);
  ASSERT_EQ(RunPreparations(), 1u);
  hub->Poll();
  ASSERT_EQ(sink.count(), 1u);
  ASSERT_EQ(sink.update(0)->kind_case(), v1::WatchUpdate::kFull);
  EXPECT_EQ(sink.update(0)->full().session().state(), v1::SESSION_STATE_LIVE);
  EXPECT_FALSE(sink.closed().has_value());
  // It keeps following the session: new events, the next tick, an update.
  ASSERT_TRUE(resumed->session->DeclareLayers(Table(2)).ok());
  resumed->session->AddBatchBytes(Batch({0, 1}, 3, 2).SerializeAsString()).value();
  now_ += absl::Milliseconds(500);
  hub->Poll();
  ASSERT_EQ(sink.count(), 2u);
  EXPECT_NE(sink.update(1)->kind_case(), v1::WatchUpdate::kSessionEnded);
  EXPECT_EQ(sink.State().snapshot().session().events(), 4u * 5u);
  EXPECT_FALSE(sink.closed().has_value());
  // And its end is the end of the stream.
  resumed->session->Finish(protocol::End(), now_);
  now_ += absl::Milliseconds(500);
  hub->Poll();
  hub->Poll();
  hub->Poll();
  ASSERT_TRUE(sink.closed().has_value());
  EXPECT_EQ(sink.last()->session_ended().state(), v1::SESSION_STATE_FINISHED);
}

TEST_F(WatchHubTest, AJobSnapshotIsPreparedOffTheHubThreadWhileOthersAreServed) {
  std::shared_ptr<Session> r0 = NewSession(2, 3, "job-7", 0);
  std::shared_ptr<Session> r1 = NewSession(2, 3, "job-7", 1);
  std::shared_ptr<Session> s = NewSession(3, 5);
  UseManualPreparation();
  WatchHub* hub = MakeHub();
  FakeSink& job = NewSink(/*auto_complete=*/true);
  FakeSink& session = NewSink(/*auto_complete=*/true);
  v1::WatchRequest request;
  request.set_job_id("job-7");
  request.set_interval_s(0.1);
  Subscribe(*hub, request, job);
  Subscribe(*hub, Request(s->id(), 0.1), session);
  hub->Poll();
  EXPECT_EQ(session.count(), 1u);
  EXPECT_EQ(job.count(), 0u);
  ASSERT_EQ(preparations_.size(), 1u);

  // A tick passes with the job's snapshot still being built: the session viewer is not held up,
  // and no second build of the job is queued behind the first.
  // (The session's feed, the second made, ticks 30.9 ms after the job's.)
  s->AddBatchBytes(Batch({0}, 5, 1).SerializeAsString()).value();
  now_ += absl::Milliseconds(131);
  hub->Poll();
  EXPECT_EQ(session.count(), 2u);
  EXPECT_EQ(job.count(), 0u);
  EXPECT_EQ(preparations_.size(), 1u);

  EXPECT_EQ(RunPreparations(), 1u);
  hub->Poll();  // Off-tick: served as soon as it is ready.
  ASSERT_EQ(job.count(), 1u);
  ASSERT_EQ(job.update(0)->kind_case(), v1::WatchUpdate::kJob);
  EXPECT_EQ(job.update(0)->sequence(), 1u);
  EXPECT_EQ(job.update(0)->job().ranks_size(), 2);
  EXPECT_GT(job.update(0)->newest_event_unix_ns(), 0);

  // The job changes; at its tick a new build starts, and the viewer is sent that one once it is
  // ready, between ticks.
  r0->AddBatchBytes(Batch({1}, 3, 1).SerializeAsString()).value();
  now_ += absl::Milliseconds(169);  // The job's next tick.
  hub->Poll();
  EXPECT_EQ(job.count(), 1u);
  ASSERT_EQ(preparations_.size(), 1u);
  now_ += absl::Milliseconds(30);
  hub->Poll();
  EXPECT_EQ(preparations_.size(), 1u);
  EXPECT_EQ(RunPreparations(), 1u);
  hub->Poll();
  ASSERT_EQ(job.count(), 2u);
  EXPECT_EQ(job.update(1)->kind_case(), v1::WatchUpdate::kJob);
  EXPECT_EQ(job.update(1)->sequence(), 2u);

  // Every rank ends: the final job, then session_ended (the rank that ended last), then close.
  r0->Finish(protocol::End(), now_);
  r1->Finish(protocol::End(), now_ + absl::Milliseconds(1));
  now_ += absl::Milliseconds(170);  // Its next tick: a whole interval after it was served.
  hub->Poll();
  EXPECT_EQ(RunPreparations(), 1u);
  hub->Poll();
  hub->Poll();
  hub->Poll();
  ASSERT_EQ(job.count(), 4u);
  EXPECT_EQ(job.update(2)->kind_case(), v1::WatchUpdate::kJob);
  ASSERT_EQ(job.update(3)->kind_case(), v1::WatchUpdate::kSessionEnded);
  EXPECT_EQ(job.update(3)->session_ended().session_id(), r1->id());
  ASSERT_TRUE(job.closed().has_value());
  EXPECT_TRUE(job.closed()->ok()) << *job.closed();
}

TEST_F(WatchHubTest, APreparationThatEndsAfterTheHubIsDroppedHarmlessly) {
  NewSession(2, 3, "job-7", 0);
  UseManualPreparation();
  WatchHub* hub = MakeHub();
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  v1::WatchRequest request;
  request.set_job_id("job-7");
  Subscribe(*hub, request, sink);
  hub->Poll();
  ASSERT_EQ(preparations_.size(), 1u);
  hub->Shutdown();  // The viewer waiting for it still gets `shutdown`.
  ASSERT_EQ(sink.count(), 1u);
  EXPECT_EQ(sink.update(0)->kind_case(), v1::WatchUpdate::kShutdown);
  ASSERT_TRUE(sink.closed().has_value());
  EXPECT_TRUE(sink.closed()->ok());
  hub_.reset();
  EXPECT_EQ(RunPreparations(), 1u);  // Runs against the manager; its result goes nowhere.
  EXPECT_EQ(sink.count(), 1u);
}

TEST_F(WatchHubTest, TheHubThreadAndItsWorkerDeliverAJob) {
  std::shared_ptr<Session> r0 = NewSession(2, 2, "job-7", 0);
  FakeSink& sink = NewSink(/*auto_complete=*/true);
  hub_ = std::make_unique<WatchHub>(manager_.get(), WatchHubOptions());  // Real clock, threads.
  v1::WatchRequest request;
  request.set_job_id("job-7");
  request.set_interval_s(0.05);
  Subscribe(*hub_, request, sink);
  ASSERT_TRUE(sink.WaitForCount(1));
  EXPECT_EQ(sink.update(0)->kind_case(), v1::WatchUpdate::kJob);
  r0->Finish(protocol::End(), absl::Now());
  ASSERT_TRUE(sink.WaitForCount(3));  // The final job, session_ended.
  ASSERT_TRUE(sink.WaitForClose());
  EXPECT_EQ(sink.update(2)->kind_case(), v1::WatchUpdate::kSessionEnded);
  EXPECT_TRUE(sink.closed()->ok());
}

}  // namespace
}  // namespace tracetorch::daemon
