#include "daemon/core/tensorboard_export.h"

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "daemon/testing/messages.h"
#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"
#include "report/tensorboard/testing/event_reader.h"

namespace tracetorch::daemon {
namespace {

using tensorboard::testing::EventFiles;
using tensorboard::testing::ReadEvent;
using tensorboard::testing::ReadEventFile;
using test_util::Batch;
using test_util::MakeHello;
using test_util::Table;
using test_util::TempDir;

// tag -> step -> value of every scalar in the session's event files; texts by tag.
struct Exported {
  std::map<std::string, std::map<int64_t, double>> scalars;
  std::map<std::string, std::string> texts;
  size_t files = 0;
};

Exported Read(const std::string& dir) {
  Exported out;
  for (const std::string& file : EventFiles(dir)) {
    ++out.files;
    absl::StatusOr<std::vector<ReadEvent>> events = ReadEventFile(file);
    EXPECT_TRUE(events.ok()) << events.status();
    if (!events.ok()) continue;
    for (const ReadEvent& e : *events) {
      if (e.value.has_value()) {
        EXPECT_EQ(out.scalars[e.tag].count(e.step), 0u) << e.tag << " step " << e.step << " twice";
        out.scalars[e.tag][e.step] = *e.value;
      } else if (!e.tag.empty()) {
        out.texts[e.tag] = e.text;
      }
    }
  }
  return out;
}

TEST(TensorBoardExporter, WritesCompleteStepsAsTheyArriveAndTheRestAtTheEnd) {
  TempDir logs{"tb_export"};
  DaemonCounters counters;
  auto m = SessionManager::Create({}, &counters);
  ASSERT_TRUE(m.ok()) << m.status();
  auto opened = (*m)->Open(MakeHello(), {});
  ASSERT_TRUE(opened.ok());
  Session& s = *opened->session;
  ASSERT_TRUE(s.DeclareLayers(Table(2)).ok());
  const std::string run = logs.path() + "/" + s.id();

  TensorBoardExporter exporter(logs.path());
  exporter.Export(**m);  // No step yet: no file.
  EXPECT_EQ(EventFiles(run).size(), 0u);

  s.AddBatchBytes(Batch({0, 1}, 0, 3).SerializeAsString()).value();  // Steps 0..2.
  exporter.Export(**m);
  Exported got = Read(run);
  EXPECT_EQ(got.files, 1u);
  // Steps 0 and 1 are complete; step 2 may still change.
  ASSERT_EQ(got.scalars["layers/net.l0/latency_ms"].size(), 2u);
  EXPECT_EQ(got.scalars["layers/net.l0/latency_ms"][1], 0.1 * 1 + 0.001 * 1);
  EXPECT_EQ(got.scalars["layers/net.l1/grad_norm"][0], 1.0);
  EXPECT_EQ(got.scalars["layers/net.l1/activation_std"][1], 1.0 + 0.01 * 1);
  EXPECT_EQ(got.scalars["layers/net.l1/non_finite"][1], 0.0);
  EXPECT_TRUE(got.texts.empty());

  exporter.Export(**m);             // Nothing new: nothing written twice (Read checks).
  s.AddBatchBytes(Batch({0, 1}, 3, 2).SerializeAsString()).value();  // Steps 3, 4.
  protocol::End end;
  s.Finish(end, absl::Now());
  exporter.Export(**m);
  got = Read(run);
  EXPECT_EQ(got.files, 1u);
  EXPECT_EQ(got.scalars["layers/net.l0/latency_ms"].size(), 5u);
  EXPECT_EQ(got.scalars["layers/net.l0/latency_ms"][4], 0.1 + 0.001 * 4);
  EXPECT_EQ(got.scalars["layers/net.l0/nan_count"][4], 0.0);
  EXPECT_EQ(got.texts.count("anomalies"), 1u);

  exporter.Export(**m);  // Ended and written: never again.
  EXPECT_EQ(Read(run).scalars["layers/net.l0/latency_ms"].size(), 5u);
  const TensorBoardExportStats stats = exporter.stats();
  EXPECT_EQ(stats.runs, 1u);
  EXPECT_EQ(stats.errors, 0u);
  EXPECT_EQ(stats.skipped_steps, 0u);
  EXPECT_EQ(stats.scalars, 2u * 5u * 4u + 2u * 2u);  // 4 per layer and step; 2 counts per layer.
}

TEST(TensorBoardExporter, CountsStepsThinnedBeforeTheyWereWritten) {
  TempDir logs{"tb_export"};
  DaemonCounters counters;
  SessionManagerOptions o;
  o.session_limits.history_steps = 8;
  auto m = SessionManager::Create(o, &counters);
  ASSERT_TRUE(m.ok()) << m.status();
  auto opened = (*m)->Open(MakeHello(), {});
  ASSERT_TRUE(opened.ok());
  ASSERT_TRUE(opened->session->DeclareLayers(Table(1)).ok());
  TensorBoardExporter exporter(logs.path());
  opened->session->AddBatchBytes(Batch({0}, 0, 2).SerializeAsString()).value();
  exporter.Export(**m);                          // Step 0 written.
  opened->session->AddBatchBytes(Batch({0}, 2, 30).SerializeAsString()).value();  // Far more than the history holds.
  exporter.Export(**m);
  EXPECT_GT(exporter.stats().skipped_steps, 0u);
  const Exported got = Read(logs.path() + "/" + opened->session->id());
  const size_t written = got.scalars.at("layers/net.l0/latency_ms").size();
  EXPECT_EQ(written + exporter.stats().skipped_steps, 31u);  // Steps 0..30 (31 is the newest).
}

TEST(TensorBoardExporter, AnUnwritableDirectoryIsCountedAndGivenUp) {
  TempDir logs{"tb_export"};
  const std::string file = logs.path() + "/not_a_dir";
  { std::ofstream(file) << "x"; }
  DaemonCounters counters;
  auto m = SessionManager::Create({}, &counters);
  ASSERT_TRUE(m.ok());
  auto opened = (*m)->Open(MakeHello(), {});
  ASSERT_TRUE(opened->session->DeclareLayers(Table(1)).ok());
  opened->session->AddBatchBytes(Batch({0}, 0, 3).SerializeAsString()).value();
  TensorBoardExporter exporter(file);
  exporter.Export(**m);
  exporter.Export(**m);
  EXPECT_EQ(exporter.stats().errors, 1u);  // Once: the run was given up.
}

}  // namespace
}  // namespace tracetorch::daemon
