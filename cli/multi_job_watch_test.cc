#include "cli/multi_job_watch.h"

#include <functional>
#include <memory>
#include <sstream>
#include <streambuf>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "cli/fake_watch_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "protocol/record_proto.h"

namespace tracetorch::cli {
namespace {

using test_util::FakeStream;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Rank `rank` of job "j", started at `started`, with two layers; `slow` multiplies the latency.
v1::Snapshot Rank(int rank, double slow = 1, int64_t started = 1) {
  v1::Snapshot s;
  s.mutable_session()->set_session_id(absl::StrCat("s", rank, "-", started));
  s.mutable_session()->set_state(v1::SESSION_STATE_LIVE);
  s.mutable_session()->set_started_unix_ns(started);
  s.mutable_session()->mutable_identity()->set_job_id("j");
  s.mutable_session()->mutable_identity()->set_rank(rank);
  TraceRecord record;
  record.metadata.model_name = "Net";
  for (const char* name : {"a", "b"}) {
    LayerTrace l;
    l.name = l.full_name = name;
    l.type = "Linear";
    l.depth = 1;
    l.forward_count = 10;
    l.latency_ms = l.latency_ms_mean = 2.0 * slow;
    record.layers.push_back(l);
  }
  ToProto(record, s.mutable_record());
  return s;
}

v1::JobSnapshot Job(std::vector<v1::Snapshot> ranks) {
  v1::JobSnapshot j;
  j.set_job_id("j");
  for (v1::Snapshot& r : ranks) *j.add_ranks() = std::move(r);
  return j;
}

v1::WatchUpdate JobUpdate(v1::JobSnapshot job) {
  v1::WatchUpdate u;
  *u.mutable_job() = std::move(job);
  return u;
}

v1::WatchUpdate Ended() {
  v1::WatchUpdate u;
  u.mutable_session_ended()->set_state(v1::SESSION_STATE_FINISHED);
  return u;
}

TEST(SplitRemoteAddresses, SplitsOnCommas) {
  EXPECT_THAT(SplitRemoteAddresses("/a.sock,h:1,,/c"), ElementsAre("/a.sock", "h:1", "/c"));
  EXPECT_THAT(SplitRemoteAddresses("/a.sock"), ElementsAre("/a.sock"));
}

TEST(MergeJobParts, PutsEveryDaemonsRanksSideBySideAndFlagsTheSlowOne) {
  std::vector<DaemonJobPart> parts = {
      {"A", Job({Rank(0), Rank(3)})},
      {"B", Job({Rank(1), Rank(4, /*slow=*/4)})},
      {"C", Job({Rank(2), Rank(5)})},
      {"D", std::nullopt},  // No job state yet.
  };
  std::vector<std::string> from;
  const v1::JobSnapshot job = MergeJobParts("j", parts, &from);
  ASSERT_EQ(job.ranks_size(), 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(job.ranks(i).session().identity().rank(), i);
  EXPECT_THAT(from, ElementsAre("A", "B", "C", "A", "B", "C"));
  // Both layers of rank 4 depart from the other ranks' median; nobody else does.
  ASSERT_EQ(job.divergences_size(), 2);
  for (const v1::Anomaly& a : job.divergences()) {
    const Anomaly d = FromProto(a);
    EXPECT_EQ(d.type, AnomalyType::kRankDivergence);
    EXPECT_EQ(std::get<int64_t>(*FindDetail(d.details, "rank")), 4);
  }
}

TEST(MergeJobParts, ARankOnTwoDaemonsIsItsLatestSession) {
  const v1::JobSnapshot job =
      MergeJobParts("j", {{"A", Job({Rank(0, 1, /*started=*/5)})}, {"B", Job({Rank(0, 1, 9)})}});
  ASSERT_EQ(job.ranks_size(), 1);
  EXPECT_EQ(job.ranks(0).session().session_id(), "s0-9");
}

// Daemon i's streams, in order (the last one again when they run out).
class FakeDaemons {
 public:
  explicit FakeDaemons(size_t n) : scripts_(n), opened_(n, 0) {}

  struct Script {
    std::vector<v1::WatchUpdate> updates;
    absl::Status finish;
    bool block_at_end = false;
  };
  void Add(size_t daemon, Script script) {
    absl::MutexLock lock(&mu_);
    scripts_[daemon].push_back(std::move(script));
  }
  // Called (without the lock) before the n-th (0-based) stream of `daemon` is opened.
  void BeforeOpen(std::function<void(size_t daemon, size_t n)> hook) { before_open_ = hook; }

  DaemonWatchOpener Opener() {
    return [this](size_t daemon,
                  const v1::WatchRequest& request) -> std::unique_ptr<service_client::WatchStream> {
      if (before_open_) {
        size_t n;
        {
          absl::MutexLock lock(&mu_);
          n = opened_[daemon];
        }
        before_open_(daemon, n);
      }
      absl::MutexLock lock(&mu_);
      EXPECT_EQ(request.job_id(), "j");
      const std::vector<Script>& list = scripts_[daemon];
      const Script& s = list[std::min(opened_[daemon]++, list.size() - 1)];
      return std::make_unique<FakeStream>(s.updates, s.finish, s.block_at_end, nullptr);
    };
  }
  size_t opened(size_t daemon) {
    absl::MutexLock lock(&mu_);
    return opened_[daemon];
  }

 private:
  absl::Mutex mu_;
  std::vector<std::vector<Script>> scripts_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> opened_ ABSL_GUARDED_BY(mu_);
  std::function<void(size_t, size_t)> before_open_;  // Set before Run.
};

// What the watcher writes, readable while it writes: WaitFor blocks until `text` was written.
class WatchedOutput : public std::streambuf {
 public:
  void WaitFor(const std::string& text) {
    absl::MutexLock lock(&mu_);
    auto written = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return text_.find(text) != std::string::npos;
    };
    mu_.Await(absl::Condition(&written));
  }
  std::string text() {
    absl::MutexLock lock(&mu_);
    return text_;
  }

 protected:
  int overflow(int c) override {
    if (c != traits_type::eof()) {
      absl::MutexLock lock(&mu_);
      text_.push_back(static_cast<char>(c));
    }
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    absl::MutexLock lock(&mu_);
    text_.append(s, static_cast<size_t>(n));
    return n;
  }

 private:
  absl::Mutex mu_;
  std::string text_ ABSL_GUARDED_BY(mu_);
};

MultiJobWatchOptions JsonOptions() {
  MultiJobWatchOptions o;
  o.addresses = {"A", "B", "C"};
  o.job_id = "j";
  o.json = true;
  o.backoff_initial = absl::Milliseconds(1);
  o.backoff_max = absl::Milliseconds(2);
  return o;
}

std::vector<nlohmann::json> Docs(const std::string& out) {
  std::vector<nlohmann::json> docs;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    docs.push_back(nlohmann::json::parse(line));
  }
  return docs;
}

TEST(MultiJobWatcher, ADaemonThatGoesAwayShowsAsSuchAndTheJsonNamesTheFlaggedRank) {
  FakeDaemons daemons(3);
  daemons.Add(0, {{JobUpdate(Job({Rank(0), Rank(3)})), Ended()}, absl::OkStatus()});
  daemons.Add(1, {{JobUpdate(Job({Rank(1), Rank(4, 4)})), Ended()}, absl::OkStatus()});
  // C: one state, then it goes away; back with the same ranks, which then end.
  daemons.Add(2, {{JobUpdate(Job({Rank(2), Rank(5)}))}, absl::UnavailableError("refused")});
  daemons.Add(2, {{JobUpdate(Job({Rank(2), Rank(5)})), Ended()}, absl::OkStatus()});
  // The handshake: C comes back only once the view has shown it away.
  WatchedOutput buffer;
  std::ostream out(&buffer);
  daemons.BeforeOpen([&buffer](size_t daemon, size_t n) {
    if (daemon == 2 && n == 1) buffer.WaitFor("\"away\"");
  });
  MultiJobWatcher watcher(daemons.Opener(), JsonOptions(), &out);
  ASSERT_TRUE(watcher.Run().ok());
  EXPECT_EQ(daemons.opened(2), 2u);

  const std::vector<nlohmann::json> docs = Docs(buffer.text());
  ASSERT_FALSE(docs.empty());
  bool saw_away = false;
  for (const nlohmann::json& d : docs) {
    EXPECT_EQ(d["type"], "job");
    EXPECT_EQ(d["kind"], "merged");
    if (d["daemons"][2]["status"] == "away") {
      saw_away = true;
      EXPECT_EQ(d["daemons"][2]["message"], "refused");
      EXPECT_EQ(d["daemons"][2]["ranks"], nlohmann::json({2, 5}));  // Its last state is kept.
    }
  }
  EXPECT_TRUE(saw_away) << buffer.text();
  const nlohmann::json& last = docs.back();
  EXPECT_EQ(last["ended"], true);
  ASSERT_EQ(last["ranks"].size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(last["ranks"][i]["session"]["rank"], i);
    EXPECT_EQ(last["ranks"][i]["daemon"], std::string(1, static_cast<char>('A' + i % 3)));
  }
  EXPECT_EQ(last["flagged_ranks"], nlohmann::json({4}));
  EXPECT_EQ(last["divergences"].size(), 2u);
  for (const nlohmann::json& d : last["daemons"]) EXPECT_EQ(d["status"], "ended");
}

TEST(MultiJobWatcher, AFatalErrorFromOneDaemonEndsTheWatchNamingIt) {
  FakeDaemons daemons(3);
  daemons.Add(0, {{JobUpdate(Job({Rank(0)}))}, absl::OkStatus(), /*block_at_end=*/true});
  daemons.Add(1, {{}, absl::UnauthenticatedError("missing or wrong token")});
  daemons.Add(2, {{JobUpdate(Job({Rank(2)}))}, absl::OkStatus(), /*block_at_end=*/true});
  std::ostringstream out;
  MultiJobWatcher watcher(daemons.Opener(), JsonOptions(), &out);
  const absl::Status s = watcher.Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(s.message(), "tracetorchd at B: missing or wrong token");
}

TEST(MultiJobWatcher, StopEndsAWatchOfLiveRanks) {
  FakeDaemons daemons(3);
  for (size_t i = 0; i < 3; ++i) {
    daemons.Add(i, {{JobUpdate(Job({Rank(static_cast<int>(i))}))}, absl::OkStatus(), true});
  }
  MultiJobWatchOptions o = JsonOptions();
  o.json = false;  // The text view: every rank side by side.
  WatchedOutput buffer;
  std::ostream out(&buffer);
  MultiJobWatcher watcher(daemons.Opener(), o, &out);
  absl::Status result;
  std::thread run([&] { result = watcher.Run(); });
  // The handshake: a frame with every daemon's rank; the streams block until cancelled.
  buffer.WaitFor("3 of 3 daemons connected (A, B, C)");
  watcher.Stop();
  run.join();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_THAT(buffer.text(), HasSubstr("job j"));
  EXPECT_THAT(buffer.text(), HasSubstr("3 ranks"));
}

}  // namespace
}  // namespace tracetorch::cli
