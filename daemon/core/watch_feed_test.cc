// The live-watch feeds on their own: what a session feed builds once and shares, how a job feed
// versions a job and prepares its snapshot, an evicted session read from disk, and the
// bookkeeping of a preparation.
#include "daemon/core/watch_feed.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/counters.h"
#include "daemon/testing/messages.h"
#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"

namespace tracetorch::daemon {
namespace {

using test_util::Batch;
using test_util::MakeHello;
using test_util::Table;
using test_util::TempDir;

class WatchFeedTest : public ::testing::Test {
 protected:
  void UseManager(SessionManagerOptions options) {
    auto m = SessionManager::Create(std::move(options), &counters_);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }
  void SetUp() override { UseManager({}); }

  SessionManager::Opened Open(int layers, int steps, const std::string& job_id = "", int rank = 0) {
    auto opened = manager_->Open(MakeHello(job_id, rank), {});
    EXPECT_TRUE(opened.ok()) << opened.status();
    EXPECT_TRUE(opened->session->DeclareLayers(Table(layers)).ok());
    std::vector<uint32_t> all;
    for (int i = 0; i < layers; ++i) all.push_back(static_cast<uint32_t>(i));
    if (steps > 0) {
      EXPECT_EQ(
          opened->session->AddBatchBytes(Batch(all, 0, steps).SerializeAsString()).value().rejected,
          0u);
    }
    return *opened;
  }
  void End(const SessionManager::Opened& opened) {
    opened.session->Finish(protocol::End(), absl::Now());
    manager_->Release(opened.session, opened.attachment, /*ended=*/true);
  }

  DaemonCounters counters_;
  std::unique_ptr<SessionManager> manager_;
};

TEST(Preparation, OneAtATimeAndTheNewestIsKept) {
  Preparation<std::string> p;
  EXPECT_EQ(p.AtOrAfter(0), nullptr);
  EXPECT_TRUE(p.Start(1, 1));
  EXPECT_TRUE(p.in_flight());
  EXPECT_FALSE(p.Start(1, 2));  // The one in flight covers it.
  EXPECT_FALSE(p.Start(5, 5));  // Newer wanted: still one at a time.
  p.Accept(1, "one");
  EXPECT_FALSE(p.in_flight());
  ASSERT_NE(p.AtOrAfter(1), nullptr);
  EXPECT_EQ(p.AtOrAfter(1)->version, 1u);
  EXPECT_EQ(p.AtOrAfter(1)->value, "one");
  EXPECT_EQ(p.AtOrAfter(0)->value, "one");
  EXPECT_FALSE(p.Start(1, 3));  // Ready already.
  EXPECT_EQ(p.AtOrAfter(2), nullptr);
  EXPECT_TRUE(p.Start(2, 3));
  p.Accept(1, "stale");  // Older than the one kept: ignored; the one in flight stays so.
  EXPECT_EQ(p.AtOrAfter(1)->value, "one");
  EXPECT_TRUE(p.in_flight());
  p.Accept(3, "three");
  EXPECT_EQ(p.AtOrAfter(2)->value, "three");
  EXPECT_EQ(p.AtOrAfter(3)->version, 3u);
  EXPECT_FALSE(p.in_flight());
}

TEST_F(WatchFeedTest, ASessionFeedReadsTheVersionOncePerPassAndBuildsOncePerVersion) {
  SessionManager::Opened s = Open(3, 5);
  SessionFeed feed(s.session);
  EXPECT_EQ(feed.session(), s.session.get());
  const uint64_t v1 = feed.Version(1);
  s.session->AddBatchBytes(Batch({0}, 5, 1).SerializeAsString()).value();
  EXPECT_EQ(feed.Version(1), v1);  // Same pass: the version read at its start.
  EXPECT_GT(feed.Version(2), v1);

  const Session::WatchView& view = feed.Refresh(2);
  EXPECT_EQ(view.version, s.session->version());
  const std::shared_ptr<const v1::Snapshot> full = feed.full();
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(full->session().events(), s.session->Info().events);
  EXPECT_TRUE(view.snapshot.record.layers.empty());  // Moved into the full.
  feed.Refresh(3);                                   // Nothing changed: the same view.
  EXPECT_EQ(feed.full(), full);
  s.session->AddBatchBytes(Batch({1}, 6, 1).SerializeAsString()).value();
  feed.Refresh(4);
  EXPECT_NE(feed.full(), full);
}

TEST_F(WatchFeedTest, DeltasAreBuiltOncePerBaseAndOnlyWhenSmallerThanTheFull) {
  SessionManager::Opened s = Open(6, 40);
  SessionFeed feed(s.session);
  const uint64_t base = feed.Refresh(1).version;
  s.session->AddBatchBytes(Batch({2}, 40, 1).SerializeAsString()).value();
  feed.Refresh(2);
  const std::shared_ptr<const v1::Snapshot> d = feed.Delta(base);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->record().layers_size(), 1);
  EXPECT_LT(d->ByteSizeLong(), feed.full()->ByteSizeLong());
  EXPECT_EQ(feed.Delta(base), d);  // Shared by every viewer at that base.

  // Every layer changed and all of the history is new: the delta would be the full.
  SessionManager::Opened empty = Open(4, 0);
  SessionFeed fresh(empty.session);
  const uint64_t before = fresh.Refresh(1).version;
  empty.session->AddBatchBytes(Batch({0, 1, 2, 3}, 0, 1).SerializeAsString()).value();
  fresh.Refresh(2);
  EXPECT_EQ(fresh.Delta(before), nullptr);
}

TEST(SummarizeJob, SignatureAllEndedAndTheLastToEnd) {
  EXPECT_FALSE(SummarizeJob({}).all_ended);  // No session: not ended (nothing to end).
  std::vector<protocol::SessionInfo> sessions(2);
  sessions[0].session_id = "a";
  sessions[0].state = SessionState::kFinished;
  sessions[0].ended = absl::FromUnixNanos(200);
  sessions[1].session_id = "b";
  sessions[1].state = SessionState::kLive;
  JobSummary live = SummarizeJob(sessions);
  EXPECT_FALSE(live.all_ended);
  ASSERT_TRUE(live.last_ended.has_value());
  EXPECT_EQ(live.last_ended->session_id, "a");

  sessions[1].state = SessionState::kAborted;
  sessions[1].ended = absl::FromUnixNanos(300);
  JobSummary ended = SummarizeJob(sessions);
  EXPECT_TRUE(ended.all_ended);
  EXPECT_EQ(ended.last_ended->session_id, "b");
  EXPECT_NE(ended.signature, live.signature);

  // Every count a viewer sees moves the signature.
  for (int field = 0; field < 3; ++field) {
    std::vector<protocol::SessionInfo> more = sessions;
    if (field == 0) more[0].events = 1;
    if (field == 1) more[0].dropped_events = 1;
    if (field == 2) more[0].rejected_events = 1;
    EXPECT_NE(SummarizeJob(more).signature, ended.signature) << field;
  }
}

TEST_F(WatchFeedTest, AJobFeedVersionMovesOnlyWhenItsSessionsChange) {
  SessionManager::Opened r0 = Open(2, 3, "job", 0);
  Open(2, 3);  // Not the job's.
  JobFeed feed("job");
  EXPECT_EQ(feed.job_id(), "job");
  const uint64_t v = feed.Check(1, *manager_);
  EXPECT_GT(v, 0u);
  EXPECT_EQ(feed.Check(2, *manager_), v);  // Nothing changed.
  r0.session->AddBatchBytes(Batch({0}, 3, 1).SerializeAsString()).value();
  EXPECT_EQ(feed.Check(2, *manager_), v);  // Same pass: not read again.
  const uint64_t after_events = feed.Check(3, *manager_);
  EXPECT_GT(after_events, v);
  Open(2, 3, "job", 1);  // A new rank.
  EXPECT_GT(feed.Check(4, *manager_), after_events);
}

TEST_F(WatchFeedTest, PreparingAJobBuildsEveryRankAndSaysWhetherItEnded) {
  SessionManager::Opened r0 = Open(2, 3, "job", 0);
  SessionManager::Opened r1 = Open(2, 3, "job", 1);
  JobFeed::Prepared p = JobFeed::Prepare(*manager_, "job", {});
  ASSERT_TRUE(p.job.ok()) << p.job.status();
  EXPECT_EQ((*p.job)->job_id(), "job");
  EXPECT_EQ((*p.job)->ranks_size(), 2);
  EXPECT_GT(p.newest_event_ns, 0);
  EXPECT_FALSE(p.all_ended);

  End(r0);
  End(r1);
  p = JobFeed::Prepare(*manager_, "job", {});
  ASSERT_TRUE(p.job.ok()) << p.job.status();
  EXPECT_TRUE(p.all_ended);
  EXPECT_EQ(p.last_ended.session_id(), r1.session->id());

  EXPECT_EQ(JobFeed::Prepare(*manager_, "no-such-job", {}).job.status().code(),
            absl::StatusCode::kNotFound);
  DivergenceThresholds bad;
  bad.latency = -1;
  EXPECT_EQ(JobFeed::Prepare(*manager_, "job", bad).job.status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(WatchFeedTest, AnEvictedSessionIsReadFromItsSnapshotFile) {
  TempDir dir{"ttfeed"};
  SessionManagerOptions o;
  o.data_dir = dir.path();
  o.max_sessions_in_memory = 1;
  UseManager(o);
  SessionManager::Opened old = Open(2, 3);
  End(old);
  Open(1, 1);  // Evicts `old`.
  absl::StatusOr<SessionManager::Found> found = manager_->Find(old.session->id());
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->session, nullptr) << "not evicted";

  absl::StatusOr<std::shared_ptr<const v1::Snapshot>> snap =
      EvictedFeed::Prepare(*manager_, old.session->id());
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ((*snap)->session().session_id(), old.session->id());
  EXPECT_EQ((*snap)->session().state(), v1::SESSION_STATE_FINISHED);
  EXPECT_EQ((*snap)->record().layers_size(), 2);
  EXPECT_EQ((*snap)->history_size(), 0);  // Not kept on disk.
  EXPECT_EQ(EvictedFeed::Prepare(*manager_, "no-such-session").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tracetorch::daemon
