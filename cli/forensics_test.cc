// `tracetorch forensics`' pure parts: the bundle view, the job's findings, and the Perfetto export
// parsed back (spans nest per track and keep their recorded durations).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "cli/forensics_view.h"
#include "cli/job_forensics.h"
#include "cli/perfetto_export.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tracetorch::cli {

using ::tracetorch::view::Style;
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'800'000'000'000'000'000;
constexpr int64_t kMs = 1'000'000;

void AddSpan(v1::ForensicBundle* b, const std::string& layer, uint64_t step, int64_t start_ms,
             int64_t duration_us, uint32_t thread, bool backward, bool non_finite = false) {
  v1::ForensicSpan* s = b->add_spans();
  s->set_layer(layer);
  s->set_step(step);
  s->set_start_unix_ns(kT0 + start_ms * kMs);
  s->set_duration_ns(duration_us * 1000 + 7);  // Sub-microsecond part: kept in args.
  s->set_thread(thread);
  s->set_backward(backward);
  s->set_non_finite(non_finite);
}

// Two steps of net (root) > [a, b]: forward on thread 10; backward on thread 11, where b's and
// a's backward overlap without nesting (parallel branches).
v1::ForensicBundle Bundle() {
  v1::ForensicBundle b;
  b.set_reason("stalled");
  b.set_written_unix_ns(kT0 + 100 * kMs);
  v1::Snapshot* snap = b.mutable_snapshot();
  snap->mutable_session()->set_session_id("s1");
  snap->mutable_session()->set_state(v1::SESSION_STATE_LIVE);
  snap->mutable_session()->mutable_identity()->set_pid(4242);
  snap->mutable_session()->mutable_identity()->set_rank(1);
  v1::FlightStatus* f = snap->mutable_session()->mutable_flight();
  f->set_recorder(true);
  f->set_stalled(true);
  f->set_position("step 1, forward, in net.b");
  f->set_layer("net.b");
  f->set_since_unix_ns(kT0 + 45 * kMs);
  f->set_stall_threshold_s(1.0);
  f->set_median_step_s(0.02);
  for (const char* name : {"net", "net.a", "net.b"}) {
    snap->mutable_record()->add_layers()->set_full_name(name);
    v1::LayerHistory* h = snap->add_history();
    h->set_full_name(name);
    for (int s = 0; s < 3; ++s) {
      h->add_steps(static_cast<uint64_t>(s));
      h->add_output_std(1.0 + s);
      h->add_grad_norm(0.5 * s);
      h->add_non_finite(false);
    }
  }
  for (uint64_t step = 0; step < 2; ++step) {
    const int64_t t = static_cast<int64_t>(step) * 20;
    AddSpan(&b, "net", step, t, 8000, 10, false);
    AddSpan(&b, "net.a", step, t + 1, 2000, 10, false);
    AddSpan(&b, "net.b", step, t + 4, 3000, 10, false, step == 1);
    AddSpan(&b, "net.b", step, t + 10, 3000, 11, true);
    AddSpan(&b, "net.a", step, t + 12, 4000, 11, true);  // Overlaps b's without nesting.
  }
  v1::ThreadStacks* st = b.add_stacks();
  st->set_tool("eu-stack");
  st->set_text("PID 4242 - process\nTID 4242:\n#0  0x1 pthread_mutex_lock\n");
  st->set_taken_unix_ns(kT0 + 101 * kMs);
  b.add_stacks()->set_tool("py-spy");
  b.mutable_stacks(1)->set_error("not taken: py-spy is not installed");
  return b;
}

TEST(ForensicsView, ShowsPositionLayersNonFiniteAndStacks) {
  v1::ForensicsResponse r;
  r.set_session_id("s1");
  *r.add_bundles() = Bundle();
  const std::string text = RenderForensics(r, ForensicsViewOptions{});
  EXPECT_THAT(text, HasSubstr("Session s1"));
  EXPECT_THAT(text, HasSubstr("1 bundle: stalled"));
  EXPECT_THAT(text, HasSubstr("step 1, forward, in net.b since"));
  EXPECT_THAT(text, HasSubstr("Median step"));
  EXPECT_THAT(text, HasSubstr("the ring's first: net.b forward at step 1"));
  EXPECT_THAT(text, HasSubstr("Layers around net.b, steps 0..1"));
  EXPECT_THAT(text, HasSubstr("> "));  // The position's row.
  EXPECT_THAT(text, HasSubstr("#0  0x1 pthread_mutex_lock"));
  EXPECT_THAT(text, HasSubstr("Stacks (py-spy): not taken: py-spy is not installed"));
  v1::ForensicsResponse empty;
  empty.set_session_id("s2");
  EXPECT_THAT(RenderForensics(empty, ForensicsViewOptions{}), HasSubstr("no forensic bundles"));
}

TEST(PerfettoExport, SpansNestPerTrackAndKeepTheirDurations) {
  const v1::ForensicBundle b = Bundle();
  const nlohmann::json trace = nlohmann::json::parse(PerfettoTrace({{"rank 1 (pid 4242)", 1, &b}}));
  ASSERT_TRUE(trace.contains("traceEvents"));
  const int64_t origin = trace["otherData"]["origin_unix_ns"].get<int64_t>();
  EXPECT_EQ(origin, kT0);
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> tracks;
  std::map<std::string, int> thread_names;
  size_t spans = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") ++thread_names[e["args"]["name"]];
    if (e["ph"] == "M" && e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"], "rank 1 (pid 4242)");
    }
    if (e["ph"] != "X") continue;
    ++spans;
    EXPECT_EQ(e["pid"], 1);
    // The recorded duration, to the nanosecond in args and to the microsecond in "dur".
    const int64_t ns = e["args"]["duration_ns"].get<int64_t>();
    EXPECT_NEAR(e["dur"].get<double>(), static_cast<double>(ns) / 1000.0, 1e-9);
    tracks[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}].push_back(
        {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
  }
  EXPECT_EQ(spans, static_cast<size_t>(b.spans_size()));
  // Every track's spans nest: sorted by start (longer first), each one either ends before the
  // next starts or contains it.
  for (auto& [track, list] : tracks) {
    std::sort(list.begin(), list.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first < y.first : x.second > y.second;
    });
    std::vector<double> open;
    for (const auto& [start, end] : list) {
      while (!open.empty() && open.back() <= start) open.pop_back();
      ASSERT_TRUE(open.empty() || end <= open.back())
          << "track " << track.second << ": [" << start << ", " << end << ") overlaps";
      open.push_back(end);
    }
  }
  // The overlapping backward got an overflow track of its thread; the forward thread has one.
  EXPECT_EQ(thread_names["thread 10"], 1);
  EXPECT_EQ(thread_names["thread 11"], 1);
  EXPECT_EQ(thread_names["thread 11 (overlap 1)"], 1);
  EXPECT_EQ(thread_names.count("thread 10 (overlap 1)"), 0u);
}

v1::JobRank Rank(int rank, bool stalled, int64_t since_ms, int64_t nan_step = -1) {
  v1::JobRank r;
  r.set_daemon("node-" + std::to_string(rank));
  v1::SessionInfo* s = r.mutable_session();
  s->set_session_id("s" + std::to_string(rank));
  s->set_state(v1::SESSION_STATE_LIVE);
  s->mutable_identity()->set_rank(rank);
  s->mutable_identity()->set_pid(100 + rank);
  s->set_started_unix_ns(kT0);
  v1::FlightStatus* f = s->mutable_flight();
  f->set_recorder(true);
  f->set_stalled(stalled);
  f->set_since_unix_ns(kT0 + since_ms * kMs);
  f->set_position("step 5, forward, in layer" + std::to_string(rank));
  if (nan_step >= 0) {
    f->set_nan_found_unix_ns(kT0 + (100 - rank) * kMs);
    f->mutable_nan_origin()->set_layer("layer" + std::to_string(rank));
    f->mutable_nan_origin()->set_step(nan_step);
  }
  return r;
}

TEST(JobForensics, NamesTheRankThatStoppedFirstAndTheFirstNan) {
  std::vector<v1::JobRank> ranks = {Rank(0, true, 50), Rank(1, true, 10), Rank(2, false, 90),
                                    Rank(3, true, 30)};
  JobFindings f = AnalyzeJob(ranks);
  ASSERT_TRUE(f.first_stopped.has_value());
  EXPECT_EQ(*f.first_stopped, 1u);
  EXPECT_EQ(f.stopped_after, (std::vector<size_t>{3, 0}));  // In the order they stopped.
  EXPECT_FALSE(f.first_nan.has_value());
  const std::string text = RenderJobForensics("j", ranks, f, Style::Plain(), kT0);
  EXPECT_THAT(text, HasSubstr("Stopped first: rank 1, step 5, forward, in layer1"));
  EXPECT_THAT(text, HasSubstr("then rank 3 (+0.020 s) rank 0 (+0.040 s), waiting behind it"));
  // A rank that died counts as stopped when it did.
  ranks[2].mutable_session()->set_state(v1::SESSION_STATE_ABORTED);
  ranks[2].mutable_session()->mutable_flight()->set_since_unix_ns(kT0 + 5 * kMs);
  EXPECT_EQ(*AnalyzeJob(ranks).first_stopped, 2u);
  // None stopped: no finding.
  EXPECT_FALSE(AnalyzeJob({Rank(0, false, 1), Rank(1, false, 2)}).first_stopped.has_value());

  // NaN: the lowest step first, then the earliest arrival.
  JobFindings n = AnalyzeJob({Rank(0, false, 1, 7), Rank(1, false, 1, 6), Rank(2, false, 1, 6)});
  ASSERT_TRUE(n.first_nan.has_value());
  EXPECT_EQ(*n.first_nan, 2u);  // Step 6 on ranks 1 and 2; rank 2's arrived earlier.
}

TEST(JobForensics, KeepsTheLatestSessionOfEachRank) {
  v1::JobRank old_rank = Rank(0, false, 1);
  v1::JobRank new_rank = Rank(0, true, 2);
  new_rank.mutable_session()->set_started_unix_ns(kT0 + 1);
  new_rank.mutable_session()->set_session_id("s0-new");
  std::vector<v1::JobRank> ranks = LatestPerRank({old_rank, Rank(1, false, 1), new_rank});
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].session().session_id(), "s0-new");
}

}  // namespace
}  // namespace tracetorch::cli
