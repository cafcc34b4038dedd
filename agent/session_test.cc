#include "agent/session.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "trace/json.h"
#include "trace/op_graph_json.h"

namespace tracetorch::agent {
namespace {

std::unique_ptr<Session> MakeSession() {
  TraceMetadata metadata;
  metadata.model_name = "Net";
  SessionOptions options;
  options.metadata = metadata;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(options));
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? *std::move(session) : nullptr;
}

// Declares "block" and runs one step: root(x) -> block(x) = log(x + shift) * x -> the output, as a
// door would (the root observed, the block a layer), with the op watch's step and pass when the
// session has one. A negative `shift` makes a NaN born at the log inside the block.
void Step(Session& session, Tracer::LayerId block, double shift) {
  const at::Tensor x = at::ones({2, 3});
  const Tracer::CallId root = session.tracer().BeginCall(Tracer::kNoLayer, true, {x});
  ops::NanOpWatch* watch = session.op_watch();
  const bool recording = watch != nullptr && session.BeginOpsStep({x});
  const Tracer::CallId call = session.tracer().BeginCall(block, false, {x});
  const int32_t pass = recording ? watch->PushModule("block", "Block", {x}, 0) : -1;
  const at::Tensor y = at::log(x + shift) * x;
  if (recording) watch->PopModule(pass, {y});
  session.tracer().EndCall(call, {y});
  session.tracer().EndCall(root, {y});
  if (recording) {
    const std::vector<at::Tensor> outputs{y};
    session.EndOpsStep(&outputs);
  }
}

Tracer::LayerId DeclareBlock(Session& session) {
  absl::StatusOr<Tracer::LayerId> id =
      session.tracer().DeclareLayer(LayerInfo{"block", "Block", "block", 1, 0});
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : Tracer::kNoLayer;
}

TEST(Session, FinishFinalisesTheRecordAndKeepsIt) {
  std::unique_ptr<Session> session = MakeSession();
  const Tracer::LayerId block = DeclareBlock(*session);
  ASSERT_TRUE(session->Start().ok());
  Step(*session, block, 1.0);
  EXPECT_TRUE(session->active());
  EXPECT_FALSE(session->Snapshot().metadata.total_time_ms.has_value());  // The trace so far.
  EXPECT_TRUE(session->Finish(12.5).ok());
  EXPECT_FALSE(session->active());
  const TraceRecord r = session->Snapshot();
  EXPECT_EQ(r.metadata.total_time_ms, 12.5);
  ASSERT_EQ(r.layers.size(), 1u);
  EXPECT_EQ(r.layers[0].forward_count, 1);
  EXPECT_EQ(session->Current()->metadata.total_time_ms, 12.5);
  EXPECT_EQ(r.metadata.FindExtra("dropped_events"), nullptr);  // It did not stream.
  EXPECT_EQ(r.op_graph, nullptr);
  EXPECT_FALSE(session->ops_stats().has_value());
}

TEST(Session, BlocksBeginAndEndOnlyWhereTheyMay) {
  std::unique_ptr<Session> session = MakeSession();
  ASSERT_TRUE(session->Start().ok());
  EXPECT_EQ(session->Start().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(session->SetOps(std::nullopt).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(session->ConnectDaemon("/tmp/x.sock", TraceMetadata{}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(session->Finish(std::nullopt).ok());
  EXPECT_FALSE(session->active());
  EXPECT_EQ(session->ConnectDaemon("tcp://example.org:1", TraceMetadata{}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session->StartWatch("/tmp/w.json", absl::Milliseconds(1)).code(),
            absl::StatusCode::kInvalidArgument);
  SessionOptions bad;
  bad.tracer.thresholds.exploding_variance_std = -1;
  EXPECT_EQ(Session::Create(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// The stream's drop count is in every record of a streamed block, whichever door: here the daemon
// is absent, so everything the block sent is dropped at the close (bounded by kCloseWait).
TEST(Session, AStreamedBlockCarriesItsDropCount) {
  std::unique_ptr<Session> session = MakeSession();
  const Tracer::LayerId block = DeclareBlock(*session);
  const std::string socket = ::testing::TempDir() + "/session_no_daemon_here.sock";
  std::filesystem::remove(socket);
  TraceMetadata identity;
  identity.model_name = "Net";
  ASSERT_TRUE(session->ConnectDaemon(socket, identity).ok());
  ASSERT_TRUE(session->Start().ok());
  Step(*session, block, 1.0);
  EXPECT_NE(session->Snapshot().metadata.FindExtra("dropped_events"), nullptr);  // Live.
  EXPECT_TRUE(session->Finish(1.0).ok());  // A stream that did not complete is no error.
  const TraceRecord streamed = session->Snapshot();
  const std::string* dropped = streamed.metadata.FindExtra("dropped_events");
  ASSERT_NE(dropped, nullptr);
  ASSERT_TRUE(session->stream_stats().has_value());
  EXPECT_EQ(*dropped, std::to_string(session->stream_stats()->client.dropped_events));
  EXPECT_GT(session->stream_stats()->client.dropped_events, 0);
  ASSERT_EQ(streamed.layers.size(), 1u);
  EXPECT_EQ(streamed.layers[0].forward_count, 1);

  // The next block does not stream: no drop count, no stream counters.
  ASSERT_TRUE(session->Start().ok());
  Step(*session, block, 1.0);
  ASSERT_TRUE(session->Finish(1.0).ok());
  EXPECT_EQ(session->Snapshot().metadata.FindExtra("dropped_events"), nullptr);
  EXPECT_FALSE(session->stream_stats().has_value());
}

TEST(Session, TheFinalWatchWriteIsLastAndItsFailureIsCountedAndReturned) {
  std::unique_ptr<Session> session = MakeSession();
  const Tracer::LayerId block = DeclareBlock(*session);
  const std::string dir = ::testing::TempDir() + "/session_watch";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(session->Start().ok());
  ASSERT_TRUE(session->StartWatch(dir + "/w.json", absl::Seconds(60)).ok());
  Step(*session, block, -5.0);  // A NaN: the final file has the anomaly.
  ASSERT_TRUE(session->Finish(3.0).ok());
  absl::StatusOr<TraceRecord> watched = ReadTraceFile(dir + "/w.json");
  ASSERT_TRUE(watched.ok()) << watched.status();
  EXPECT_EQ(watched->metadata.total_time_ms, 3.0);
  EXPECT_FALSE(watched->warnings.empty());

  ASSERT_TRUE(session->Start().ok());
  ASSERT_TRUE(session->StartWatch(dir + "/absent/w.json", absl::Seconds(60)).ok());
  Step(*session, block, 1.0);
  const absl::Status s = session->Finish(4.0);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_EQ(session->tracer().hook_errors(), 1);
  EXPECT_EQ(session->Snapshot().metadata.total_time_ms, 4.0);  // Finished anyway.
}

TEST(Session, OpsKeepTheFirstNanStepAndDecorateEveryRecord) {
  std::unique_ptr<Session> session = MakeSession();
  const Tracer::LayerId block = DeclareBlock(*session);
  OpsOptions ops;
  ops.model_name = "Net";
  ops.root_type = "Net";
  ops.source = "cpp";
  ASSERT_TRUE(session->SetOps(std::move(ops)).ok());
  ASSERT_TRUE(session->Start().ok());
  Step(*session, block, 1.0);
  EXPECT_EQ(session->kept_ops(), nullptr);
  Step(*session, block, -5.0);  // Step 1: the NaN.
  Step(*session, block, -5.0);  // Not recorded: the first origin is kept.
  ASSERT_NE(session->kept_ops(), nullptr);
  const std::optional<OpsStats> stats = session->ops_stats();
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->recorded_steps, 2);
  EXPECT_EQ(stats->skipped_steps, 0);
  EXPECT_EQ(stats->kept_step, 1);
  EXPECT_EQ(session->Snapshot().op_graph, session->kept_ops()->graph);  // Live too.
  ASSERT_TRUE(session->Finish(1.0).ok());

  const TraceRecord r = session->Snapshot();
  ASSERT_NE(r.op_graph, nullptr);
  EXPECT_EQ(r.op_graph, session->kept_ops()->graph);
  // What the stream was sent: the same graph as its document.
  EXPECT_EQ(session->kept_ops()->json, OpGraphToJson(*r.op_graph, 0));
  ASSERT_TRUE(r.metadata.nan_origin.has_value());
  EXPECT_EQ(r.metadata.nan_origin->layer, "block");
  EXPECT_EQ(r.metadata.nan_origin->step, 1);
  EXPECT_EQ(r.metadata.nan_origin->op_func, "log");
  EXPECT_EQ(r.metadata.nan_origin->op_module, "block");
  absl::StatusOr<OpGraph> g = ParseOpGraphJson(session->kept_ops()->json);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->source, "cpp");
  EXPECT_EQ(g->step, 1);
  EXPECT_EQ(session->tracer().hook_errors(), 0);

  // Ops off for the next block: nothing kept, no counters.
  ASSERT_TRUE(session->SetOps(std::nullopt).ok());
  EXPECT_EQ(session->op_watch(), nullptr);
  EXPECT_EQ(session->kept_ops(), nullptr);
  EXPECT_FALSE(session->ops_stats().has_value());
}

}  // namespace
}  // namespace tracetorch::agent
