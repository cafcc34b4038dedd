#include "daemon/metrics/daemon_metrics.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/counters.h"
#include "daemon/testing/messages.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace tracetorch::daemon {
namespace {

using test_util::Batch;
using test_util::MakeHello;
using test_util::Table;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Text(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

TEST(StatsSeriesTable, NamesEveryDaemonStatsFieldOnceAfterPrometheusConventions) {
  const google::protobuf::Descriptor* d = v1::DaemonStats::descriptor();
  std::set<std::string> fields, names;
  for (const StatsSeries& s : StatsSeriesTable()) {
    EXPECT_NE(d->FindFieldByName(s.field), nullptr) << s.field;
    EXPECT_TRUE(fields.insert(s.field).second) << s.field;
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_TRUE(absl::StartsWith(s.name, "tracetorchd_")) << s.name;
    EXPECT_EQ(absl::EndsWith(s.name, "_total"), s.counter) << s.name;
  }
  for (int i = 0; i < d->field_count(); ++i) {
    EXPECT_EQ(fields.count(d->field(i)->name()), 1u) << "not exported: " << d->field(i)->name();
  }
}

TEST(StatsFamilies, ExportEachCounterAndGaugeWithItsValue) {
  v1::DaemonStats s;
  s.set_events_total(42);
  s.set_dropped_events(7);
  s.set_rejected_frames(3);
  s.set_live_sessions(2);
  s.set_cpu_seconds(1.5);
  const std::string text = Text(StatsFamilies(s));
  EXPECT_THAT(text, HasSubstr("# TYPE tracetorchd_events_total counter\n"));
  EXPECT_THAT(text, HasSubstr("\ntracetorchd_events_total 42\n"));
  EXPECT_THAT(text, HasSubstr("\ntracetorchd_dropped_events_total 7\n"));
  EXPECT_THAT(text, HasSubstr("\ntracetorchd_rejected_frames_total 3\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE tracetorchd_live_sessions gauge\n"));
  EXPECT_THAT(text, HasSubstr("\ntracetorchd_live_sessions 2\n"));
  EXPECT_THAT(text, HasSubstr("\ntracetorchd_cpu_seconds_total 1.5\n"));
  EXPECT_THAT(text, HasSubstr("\ntracetorchd_connections_timed_out_total 0\n"));
}

class DaemonMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = SessionManager::Create(SessionManagerOptions{}, &counters_);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  // A live session of `job` as `rank` (no job: -1) with 3 layers over `steps` steps; its
  // forward latencies multiplied by `slow`.
  std::shared_ptr<Session> Run(const std::string& job, int rank, int steps, double slow = 1) {
    auto opened = manager_->Open(MakeHello(job, rank), {});
    EXPECT_TRUE(opened.ok()) << opened.status();
    EXPECT_TRUE(opened->session->DeclareLayers(Table(3)).ok());
    v1::EventBatch b = Batch({0, 1, 2}, 0, steps);
    for (v1::ForwardEvent& f : *b.mutable_forward()) f.set_latency_ms(f.latency_ms() * slow);
    opened->session->AddBatchBytes(b.SerializeAsString()).value();
    return opened->session;
  }

  DaemonCounters counters_;
  std::unique_ptr<SessionManager> manager_;
};

TEST_F(DaemonMetricsTest, ExportsEachLiveSessionWithItsLabels) {
  std::shared_ptr<Session> s = Run("job-a", 1, 5);
  DaemonMetrics metrics([] { return v1::DaemonStats(); }, manager_.get(), {});
  const std::string text = Text(metrics.Collect());
  const std::string labels =
      absl::StrCat("{session=\"", s->id(), "\",job_id=\"job-a\",rank=\"1\",model=\"Net\"}");
  EXPECT_THAT(text, HasSubstr(absl::StrCat("tracetorchd_session_steps_total", labels, " 5\n")));
  // 3 layers x 5 steps, forward and backward.
  EXPECT_THAT(text, HasSubstr(absl::StrCat("tracetorchd_session_events_total", labels, " 30\n")));
  EXPECT_THAT(text,
              HasSubstr(absl::StrCat("tracetorchd_session_nan_origin_known", labels, " 0\n")));
  EXPECT_THAT(text,
              HasSubstr(absl::StrCat("tracetorchd_session_rank_divergences", labels, " 0\n")));
  // The outermost layers are all of depth 2; the slowest (l2) ran its last step in
  // 0.3 + 0.004 ms.
  EXPECT_THAT(text,
              HasSubstr(absl::StrCat("tracetorchd_session_step_seconds", labels, " 0.000304")));
  EXPECT_THAT(text, HasSubstr("tracetorchd_session_last_event_timestamp_seconds{"));
  EXPECT_THAT(text, HasSubstr("\ntracetorchd_events_total 0\n"));
  // Per-layer series are opt-in.
  EXPECT_THAT(text, Not(HasSubstr("tracetorchd_layer_")));
}

TEST_F(DaemonMetricsTest, EndedSessionsHaveNoSeries) {
  std::shared_ptr<Session> s = Run("", 0, 2);
  s->Finish(protocol::End(), absl::Now());
  DaemonMetrics metrics([] { return v1::DaemonStats(); }, manager_.get(), {});
  EXPECT_THAT(Text(metrics.Collect()), Not(HasSubstr("tracetorchd_session_")));
}

TEST_F(DaemonMetricsTest, CountsAnomaliesByTypeAndSeverityAndKnowsTheNanOrigin) {
  auto opened = manager_->Open(MakeHello(), {});
  ASSERT_TRUE(opened.ok());
  ASSERT_TRUE(opened->session->DeclareLayers(Table(2)).ok());
  v1::EventBatch b = Batch({0, 1}, 0, 3);
  b.mutable_forward(5)->mutable_outputs(0)->mutable_stats()->set_nan_count(4);  // l1, step 2.
  // The agent finds the origin and sends it with the next batch.
  b.mutable_nan_origin()->set_layer("net.l1");
  b.mutable_nan_origin()->set_step(2);
  b.mutable_nan_origin()->set_is_nan(true);
  opened->session->AddBatchBytes(b.SerializeAsString()).value();
  DaemonMetrics metrics([] { return v1::DaemonStats(); }, manager_.get(), {});
  const std::string text = Text(metrics.Collect());
  const std::string labels =
      absl::StrCat("session=\"", opened->session->id(), "\",job_id=\"\",rank=\"\",model=\"Net\"");
  EXPECT_THAT(text, HasSubstr(absl::StrCat("tracetorchd_session_anomalies{", labels,
                                           ",type=\"nan_activation\",severity=\"critical\"} 1\n")));
  EXPECT_THAT(text,
              HasSubstr(absl::StrCat("tracetorchd_session_nan_origin_known{", labels, "} 1\n")));
}

TEST_F(DaemonMetricsTest, FlagsTheSlowRankOfAJobWithTheCoreDivergence) {
  std::vector<std::shared_ptr<Session>> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(Run("job-b", r, 4, r == 2 ? 5.0 : 1.0));
  DaemonMetrics metrics([] { return v1::DaemonStats(); }, manager_.get(), {});
  const std::string text = Text(metrics.Collect());
  for (int r = 0; r < 4; ++r) {
    const std::string series =
        absl::StrCat("tracetorchd_session_rank_divergences{session=\"", ranks[r]->id(),
                     "\",job_id=\"job-b\",rank=\"", r, "\",model=\"Net\"} ");
    // Rank 2 is 5x slower on each of its 3 layers; the others are judged normal.
    EXPECT_THAT(text, HasSubstr(absl::StrCat(series, r == 2 ? "3\n" : "0\n")));
  }
}

TEST_F(DaemonMetricsTest, ExportsTheNSlowestLayersWhenAsked) {
  std::shared_ptr<Session> s = Run("", 0, 2);
  DaemonMetrics metrics([] { return v1::DaemonStats(); }, manager_.get(),
                        {.layers_per_session = 2});
  const std::string text = Text(metrics.Collect());
  const std::string labels =
      absl::StrCat("session=\"", s->id(), "\",job_id=\"\",rank=\"\",model=\"Net\"");
  EXPECT_THAT(text, HasSubstr(absl::StrCat("tracetorchd_layer_latency_seconds{", labels,
                                           ",layer=\"net.l2\"}")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("tracetorchd_layer_latency_seconds{", labels,
                                           ",layer=\"net.l1\"}")));
  EXPECT_THAT(text, Not(HasSubstr("layer=\"net.l0\"")));
  // Steps 0 and 1: the latest gradient norm is 2.
  EXPECT_THAT(text, HasSubstr(absl::StrCat("tracetorchd_layer_grad_norm{", labels,
                                           ",layer=\"net.l2\"} 2\n")));
}

TEST_F(DaemonMetricsTest, AScrapeThatThrowsYieldsNoSeriesAndDoesNotThrow) {
  DaemonMetrics metrics([]() -> v1::DaemonStats { throw std::runtime_error("boom"); },
                        manager_.get(), {});
  EXPECT_TRUE(metrics.Collect().empty());
}

}  // namespace
}  // namespace tracetorch::daemon
