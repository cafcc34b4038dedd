#include "daemon/core/session.h"

#include <cmath>
#include <optional>

#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"
#include "protocol/codes.h"
#include "trace/json.h"
#include "trace/op_graph.h"
#include "trace/op_graph_json.h"
#include "tracetorch/v1/agent.pb.h"

namespace tracetorch::daemon {
namespace {

protocol::Hello MakeHello() {
  protocol::Hello h;
  h.protocol_version = 1;
  h.identity.pid = 77;
  h.identity.host = "box";
  h.identity.model_name = "Net";
  h.identity.torch_version = "1.13.1";
  return h;
}

std::vector<protocol::LayerDecl> Table() {
  std::vector<protocol::LayerDecl> t;
  auto add = [&](uint32_t id, const char* name, const char* type, const char* full, int depth) {
    t.push_back({id, {name, type, full, depth, 10 * id}});
  };
  add(0, "fc1", "Linear", "net.fc1", 2);
  add(1, "relu", "ReLU", "net.relu", 2);
  add(2, "net", "Net", "net", 1);
  return t;
}

TensorInfo Tensor(double mean, double std, int64_t nans) {
  return TensorInfo{{8, 4}, "torch.float32", "cpu", TensorStats{mean, std, -1.0, 1.0, nans, 0}};
}

void ToWire(const TensorInfo& t, v1::TensorEvent* out) {
  for (int64_t d : t.shape) out->add_shape(d);
  out->set_dtype(protocol::DtypeCode(t.dtype));
  out->set_device(protocol::DeviceCode(t.device));
  if (t.stats) {
    v1::TensorStats* s = out->mutable_stats();
    if (t.stats->mean) s->set_mean(*t.stats->mean);
    if (t.stats->std) s->set_std(*t.stats->std);
    if (t.stats->min) s->set_min(*t.stats->min);
    if (t.stats->max) s->set_max(*t.stats->max);
    s->set_nan_count(t.stats->nan_count);
    s->set_inf_count(t.stats->inf_count);
  }
}

// Feeds the same synthetic run to a TraceAggregator and to a Session (as wire events).
struct Run {
  TraceAggregator reference;
  v1::EventBatch batch;
};

void Generate(int steps, TraceAggregator& ref, v1::EventBatch* batch) {
  const LayerInfo infos[] = {{"fc1", "Linear", "net.fc1", 2, 0},
                             {"relu", "ReLU", "net.relu", 2, 10},
                             {"net", "Net", "net", 1, 20}};
  for (const LayerInfo& i : infos) ASSERT_TRUE(ref.DeclareLayer(i).ok());
  for (int step = 0; step < steps; ++step) {
    for (int layer = 0; layer < 3; ++layer) {
      ForwardSample f;
      f.latency_ms = 0.1 * (layer + 1) + 0.01 * step;
      f.inputs = {Tensor(0.0, 1.0, 0)};
      f.outputs = {Tensor(0.5 * layer, 2.0 + step, layer == 1 && step == 2 ? 3 : 0)};
      if (layer == 0) f.mem_alloc_delta = -128 * step;
      v1::ForwardEvent* e = batch->add_forward();
      e->set_layer_id(static_cast<uint32_t>(layer));
      e->set_step(static_cast<uint64_t>(step));
      e->set_latency_ms(*f.latency_ms);
      ToWire(f.inputs[0], e->add_inputs());
      ToWire(f.outputs[0], e->add_outputs());
      if (f.mem_alloc_delta) e->set_mem_alloc_delta(*f.mem_alloc_delta);
      ASSERT_TRUE(ref.AddForward(layer, f).ok());
    }
    for (int layer = 2; layer >= 0; --layer) {
      BackwardSample b;
      b.latency_ms = 0.2;
      b.grad_norm = 1.0 + step;
      b.grad_mean = 0.0;
      b.grad_all_zero = layer == 2 && step == 1;
      v1::BackwardEvent* e = batch->add_backward();
      e->set_layer_id(static_cast<uint32_t>(layer));
      e->set_step(static_cast<uint64_t>(step));
      e->set_latency_ms(*b.latency_ms);
      e->set_grad_norm(*b.grad_norm);
      e->set_grad_mean(*b.grad_mean);
      e->set_grad_all_zero(b.grad_all_zero);
      ASSERT_TRUE(ref.AddBackward(layer, b).ok());
    }
  }
}

TEST(Session, SnapshotEqualsAnAggregatorFedTheSameSamples) {
  Session s("id-1", MakeHello(), {1, 2, 3}, absl::Now(), {}, {});
  ASSERT_TRUE(s.DeclareLayers(Table()).ok());
  TraceAggregator ref;
  v1::EventBatch batch;
  Generate(5, ref, &batch);
  BatchOutcome r = s.AddBatchBytes(batch.SerializeAsString()).value();
  EXPECT_EQ(r.accepted, 30u);
  EXPECT_EQ(r.rejected, 0u);

  TraceRecord expected = ref.Snapshot();
  absl::StatusOr<std::vector<Anomaly>> anomalies = DetectAnomalies(expected);
  ASSERT_TRUE(anomalies.ok());
  expected.warnings = *anomalies;
  const TraceRecord got = s.Record();
  EXPECT_EQ(got.layers, expected.layers);
  EXPECT_EQ(got.warnings, expected.warnings);
  EXPECT_FALSE(got.warnings.empty());  // NaN output and a zero gradient were planted.
  EXPECT_EQ(got.metadata.model_name, "Net");
  EXPECT_EQ(got.metadata.pytorch_version, "1.13.1");

  protocol::Snapshot snap = s.ToSnapshot();
  EXPECT_EQ(snap.session.events, 30u);
  EXPECT_EQ(snap.session.peer_pid, 1);
  EXPECT_EQ(snap.session.peer_uid, 2);
  ASSERT_EQ(snap.history.layers.size(), 3u);
  EXPECT_EQ(snap.history.layers[0].steps.size(), 5u);
  EXPECT_DOUBLE_EQ(snap.history.layers[0].grad_norm[4], 5.0);
  EXPECT_DOUBLE_EQ(snap.history.layers[0].output_std[4], 6.0);
}

// A layer's latest tensors are those of its latest forward event, whether the event was small (kept
// encoded until a record is made) or over kMaxDeferredForwardBytes (decoded at once), in any order
// of the two, across batches, and in every form a record takes (Record, ToSnapshot, the file).
TEST(Session, LatestTensorsFollowTheLatestEventSmallOrLarge) {
  Session s("id-1", MakeHello(), {}, absl::Now(), {}, {});
  ASSERT_TRUE(s.DeclareLayers(Table()).ok());
  // One batch of layer 0's forward events, each (step, outputs); output i of step s has mean s and
  // std i + 1. An event of 16 outputs is large (their shapes have 14 dimensions).
  auto batch = [](const std::vector<std::pair<uint64_t, int>>& events) {
    v1::EventBatch b;
    for (const auto& [step, tensors] : events) {
      v1::ForwardEvent* e = b.add_forward();
      e->set_layer_id(0);
      e->set_step(step);
      for (int i = 0; i < tensors; ++i) {
        v1::TensorEvent* t = e->add_outputs();
        ToWire(Tensor(static_cast<double>(step), 1.0 + i, 0), t);
        if (tensors == 16) {
          for (int d = 0; d < 12; ++d) t->add_shape(300);  // 14 dimensions: a large event.
        }
      }
      EXPECT_EQ(tensors == 16, e->ByteSizeLong() > kMaxDeferredForwardBytes) << e->ByteSizeLong();
    }
    return b.SerializeAsString();
  };
  const test_util::TempDir dir;
  const std::string path = dir.path() + "/s.json";
  // Small, large, small, large; then a large and a small in one batch, and the reverse (the later
  // event of a batch is the latest).
  const std::vector<std::vector<std::pair<uint64_t, int>>> batches = {
      {{0, 2}}, {{1, 16}}, {{2, 3}}, {{3, 16}}, {{4, 16}, {5, 1}}, {{6, 2}, {7, 16}}};
  for (size_t k = 0; k < batches.size(); ++k) {
    const auto [step, tensors] = batches[k].back();
    ASSERT_TRUE(s.AddBatchBytes(batch(batches[k])).ok());
    for (const TraceRecord& r : {s.Record(), s.ToSnapshot().record}) {
      ASSERT_EQ(r.layers.size(), 1u);
      const std::vector<TensorInfo>& out = r.layers[0].outputs;
      ASSERT_EQ(out.size(), static_cast<size_t>(tensors)) << "batch " << k;
      EXPECT_EQ(out.back().stats->mean, static_cast<double>(step)) << "batch " << k;
      EXPECT_EQ(out.back().stats->std, static_cast<double>(tensors)) << "batch " << k;
    }
    ASSERT_TRUE(s.WriteSnapshot(path, /*force=*/true).ok());
    absl::StatusOr<TraceRecord> file = ReadTraceFile(path);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(file->layers[0].outputs.size(), static_cast<size_t>(tensors)) << "batch " << k;
  }
}

// ops="on_nan": the origin arrives first without its op (mid-forward), then again with the op and
// the op graph (after the step's forward). The session keeps the op and the first graph that reads;
// the snapshot carries both.
TEST(Session, KeepsTheOriginOpAndTheOpGraph) {
  Session s("id-1", MakeHello(), {1, 2, 3}, absl::Now(), {}, {});
  ASSERT_TRUE(s.DeclareLayers(Table()).ok());
  v1::EventBatch first;
  first.set_sequence(1);
  first.mutable_nan_origin()->set_layer("net.relu");
  first.mutable_nan_origin()->set_step(2);
  first.mutable_nan_origin()->set_is_nan(true);
  s.AddBatchBytes(first.SerializeAsString()).value();
  EXPECT_EQ(s.Record().op_graph, nullptr);

  v1::EventBatch garbage;
  garbage.set_sequence(2);
  garbage.set_op_graph_json("{not json");
  s.AddBatchBytes(garbage.SerializeAsString()).value();
  EXPECT_EQ(s.Record().op_graph, nullptr);

  OpGraph g;
  g.model_name = "Net";
  g.source = "eager";
  g.step = 2;
  ModulePass root;
  root.type = "Net";
  g.modules = {root};
  v1::EventBatch second = first;
  second.set_sequence(3);
  second.mutable_nan_origin()->set_op("div_1_4");
  second.mutable_nan_origin()->set_op_func("div");
  second.mutable_nan_origin()->set_op_module("net");
  second.set_op_graph_json(OpGraphToJson(g, 2));  // Indented: the snapshot sends it minified.
  s.AddBatchBytes(second.SerializeAsString()).value();
  const TraceRecord r = s.Record();
  ASSERT_TRUE(r.metadata.nan_origin.has_value());
  EXPECT_EQ(r.metadata.nan_origin->layer, "net.relu");
  EXPECT_EQ(r.metadata.nan_origin->op, "div_1_4");
  EXPECT_EQ(r.metadata.nan_origin->op_module, "net");
  ASSERT_NE(r.op_graph, nullptr);
  EXPECT_EQ(*r.op_graph, g);
  const protocol::Snapshot snap = s.ToSnapshot();
  ASSERT_NE(snap.record.op_graph, nullptr);
  EXPECT_EQ(*snap.record.op_graph, g);

  // A later, different origin does not replace the first.
  v1::EventBatch other = second;
  other.set_sequence(4);
  other.mutable_nan_origin()->set_layer("net.fc1");
  other.mutable_nan_origin()->set_op("log_1_1");
  s.AddBatchBytes(other.SerializeAsString()).value();
  EXPECT_EQ(s.Record().metadata.nan_origin->op, "div_1_4");

  // A restarted daemon restores the record from the snapshot and keeps the graph.
  Session restored("id-1", MakeHello(), {1, 2, 3}, absl::Now(), {}, {},
                   Session::Restored{r, protocol::SessionIndexEntry()});
  ASSERT_NE(restored.Record().op_graph, nullptr);
  EXPECT_EQ(*restored.Record().op_graph, g);
  EXPECT_EQ(restored.Record().metadata.nan_origin->op, "div_1_4");
}

TEST(Session, UndeclaredLayerEventsAreRejectedAndCounted) {
  Session s("id", MakeHello(), {}, absl::Now(), {}, {});
  ASSERT_TRUE(s.DeclareLayers(Table()).ok());
  v1::EventBatch batch;
  batch.add_forward()->set_layer_id(0);
  batch.add_forward()->set_layer_id(9);
  batch.add_backward()->set_layer_id(1234);
  BatchOutcome r = s.AddBatchBytes(batch.SerializeAsString()).value();
  EXPECT_EQ(r.accepted, 1u);
  EXPECT_EQ(r.rejected, 2u);
  EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Info().rejected_events, 2u);
  EXPECT_EQ(s.Info().events, 1u);
}

TEST(Session, LayerLimitsAndConflicts) {
  SessionLimits limits;
  limits.max_layers = 2;
  Session s("id", MakeHello(), {}, absl::Now(), limits, {});
  // Table() declares three layers: the third is over the limit.
  EXPECT_EQ(s.DeclareLayers(Table()).code(), absl::StatusCode::kResourceExhausted);
  // Re-declaring known layers (a reconnect) is fine at the limit.
  std::vector<protocol::LayerDecl> again = Table();
  again.pop_back();
  EXPECT_TRUE(s.DeclareLayers(again).ok());
  // An id re-used for another layer, and an absurd id.
  std::vector<protocol::LayerDecl> renamed(1);
  renamed[0].id = 0;
  renamed[0].info.full_name = "zzz";
  EXPECT_EQ(s.DeclareLayers(renamed).code(), absl::StatusCode::kInvalidArgument);
  std::vector<protocol::LayerDecl> huge(1);
  huge[0].id = 4000000000u;
  huge[0].info.full_name = "far";
  EXPECT_EQ(s.DeclareLayers(huge).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Session, StatesAndDroppedEvents) {
  Session s("id", MakeHello(), {}, absl::Now(), {}, {});
  EXPECT_EQ(s.state(), SessionState::kLive);
  protocol::Heartbeat hb;
  hb.dropped_events = 4;
  s.Heartbeat(hb);
  protocol::End end;
  end.total_time_ms = 12.5;
  end.dropped_events = 6;
  s.Finish(end, absl::Now());
  EXPECT_EQ(s.state(), SessionState::kFinished);
  s.Abort(absl::Now());  // A finished session stays finished.
  EXPECT_EQ(s.state(), SessionState::kFinished);
  EXPECT_EQ(s.Info().state, SessionState::kFinished);
  EXPECT_NE(s.Info().ended, absl::InfinitePast());
  const TraceRecord r = s.Record();
  EXPECT_EQ(r.metadata.total_time_ms, 12.5);
  const std::string* dropped = nullptr;
  for (const auto& [k, v] : r.metadata.extra) {
    if (k == "dropped_events") dropped = &v;
  }
  ASSERT_NE(dropped, nullptr);
  EXPECT_EQ(*dropped, "6");
}

TEST(Session, ResumeCountsTheGapAsDropped) {
  Session s("id", MakeHello(), {}, absl::Now(), {}, {});
  ASSERT_TRUE(s.DeclareLayers(Table()).ok());
  v1::EventBatch batch;
  for (int i = 0; i < 10; ++i) batch.add_forward()->set_layer_id(0);
  s.AddBatchBytes(batch.SerializeAsString()).value();
  s.Abort(absl::Now());
  protocol::Hello again = MakeHello();
  again.resume_session_id = "id";
  again.sent_events = 25;  // 15 written to the old connection never arrived.
  again.dropped_events = 3;
  s.Resume(again, {});
  EXPECT_EQ(s.state(), SessionState::kLive);
  EXPECT_EQ(s.Info().dropped_events, 18u);
  s.Resume(again, {});  // Idempotent: nothing new is missing.
  EXPECT_EQ(s.Info().dropped_events, 18u);
}

v1::EventBatch Batch(uint64_t sequence, std::optional<uint64_t> first_event, int events) {
  v1::EventBatch b;
  b.set_sequence(sequence);
  if (first_event.has_value()) b.set_first_event(*first_event);
  for (int i = 0; i < events; ++i) b.add_forward()->set_layer_id(0);
  return b;
}

TEST(Session, ReSentEventsAreSkippedAndGapsCountedOnce) {
  Session s("id", MakeHello(), {}, absl::Now(), {}, {});
  ASSERT_TRUE(s.DeclareLayers(Table()).ok());
  EXPECT_EQ(s.AddBatchBytes(Batch(1, 0, 4).SerializeAsString()).value().accepted, 4u);
  // The same batch again (re-sent after a reconnect): nothing counted twice.
  BatchOutcome again = s.AddBatchBytes(Batch(1, 0, 4).SerializeAsString()).value();
  EXPECT_EQ(again.accepted, 0u);
  EXPECT_EQ(again.duplicates, 4u);
  // A batch overlapping the end of what is held: only its new events count.
  BatchOutcome overlap = s.AddBatchBytes(Batch(2, 2, 5).SerializeAsString()).value();
  EXPECT_EQ(overlap.duplicates, 2u);
  EXPECT_EQ(overlap.accepted, 3u);
  EXPECT_EQ(s.Info().events, 7u);
  EXPECT_EQ(s.Info().dropped_events, 0u);
  // Positions 7..9 never arrive: counted as dropped once, when the batch after them does.
  EXPECT_EQ(s.AddBatchBytes(Batch(3, 10, 1).SerializeAsString()).value().accepted, 1u);
  EXPECT_EQ(s.Info().dropped_events, 3u);
  EXPECT_EQ(s.AddBatchBytes(Batch(3, 10, 1).SerializeAsString()).value().duplicates, 1u);
  EXPECT_EQ(s.Info().dropped_events, 3u);
  // An older agent's batch (no position) is applied as new.
  EXPECT_EQ(s.AddBatchBytes(Batch(4, std::nullopt, 2).SerializeAsString()).value().accepted, 2u);
  EXPECT_EQ(s.Info().events, 10u);
  EXPECT_EQ(s.IndexEntry().last_sequence, 4u);
}

TEST(Session, AResumeThatReSendsCountsOnlyWhatIsNotReSent) {
  Session s("id", MakeHello(), {}, absl::Now(), {}, {});
  ASSERT_TRUE(s.DeclareLayers(Table()).ok());
  s.AddBatchBytes(Batch(1, 0, 10).SerializeAsString()).value();
  s.Abort(absl::Now());
  protocol::Hello again = MakeHello();
  again.resume_session_id = "id";
  again.sent_events = 25;         // 15 written after what arrived...
  again.replay_first_event = 12;  // ...of which the agent still holds 12..24 to re-send.
  s.Resume(again, {});
  EXPECT_EQ(s.Info().dropped_events, 2u);  // 10 and 11.
  EXPECT_EQ(s.AddBatchBytes(Batch(2, 12, 13).SerializeAsString()).value().accepted, 13u);
  EXPECT_EQ(s.Info().events, 23u);
  EXPECT_EQ(s.Info().events + s.Info().dropped_events, 25u);
  s.Resume(again, {});  // Idempotent.
  EXPECT_EQ(s.Info().dropped_events, 2u);
}

TEST(Session, ABatchWithoutEventsAppliesItsFieldsEvenWhenReSent) {
  Session s("id", MakeHello(), {}, absl::Now(), {}, {});
  ASSERT_TRUE(s.DeclareLayers(Table()).ok());
  s.AddBatchBytes(Batch(1, 0, 3).SerializeAsString()).value();
  OpGraph g;
  g.model_name = "Net";
  ModulePass root;
  root.type = "Net";
  g.modules = {root};
  v1::EventBatch graph = Batch(2, 3, 0);
  graph.mutable_nan_origin()->set_layer("net.relu");
  graph.set_op_graph_json(OpGraphToJson(g, 0));
  // A later batch arrived first (the graph's frame was cut).
  s.AddBatchBytes(Batch(3, 3, 2).SerializeAsString()).value();
  // Re-sent: its position is below the session's, its fields apply.
  s.AddBatchBytes(graph.SerializeAsString()).value();
  ASSERT_NE(s.Record().op_graph, nullptr);
  EXPECT_EQ(*s.Record().op_graph, g);
  ASSERT_TRUE(s.Record().metadata.nan_origin.has_value());
  EXPECT_EQ(s.Info().events, 5u);
}

TEST(Session, DurablePointFollowsTheSnapshotOnDisk) {
  test_util::TempDir dir("ttsession");
  Session s("id", MakeHello(), {}, absl::Now(), {}, {});
  ASSERT_TRUE(s.DeclareLayers(Table()).ok());
  s.AddBatchBytes(Batch(5, 0, 4).SerializeAsString()).value();
  EXPECT_EQ(s.durable(), (Session::Durable{0, 0}));  // Nothing on disk yet.
  const std::string path = dir.path() + "/id.json";
  ASSERT_TRUE(s.WriteSnapshot(path, /*force=*/false).ok());
  EXPECT_EQ(s.durable(), (Session::Durable{5, 4}));
  s.AddBatchBytes(Batch(6, 4, 1).SerializeAsString()).value();
  EXPECT_EQ(s.durable(), (Session::Durable{5, 4}));  // In memory only.
  // A restart continues from the file: its durable point is the file's.
  absl::StatusOr<TraceRecord> record = ReadTraceFile(path);
  ASSERT_TRUE(record.ok()) << record.status();
  std::optional<protocol::SessionIndexEntry> entry = TakeSnapshotAccounting(&*record);
  ASSERT_TRUE(entry.has_value());
  Session restored("id", MakeHello(), {}, absl::Now(), {}, {},
                   Session::Restored{*std::move(record), *std::move(entry)});
  EXPECT_EQ(restored.durable(), (Session::Durable{5, 4}));
}

TEST(MergeRecords, CombinesCountsAndKeepsLatest) {
  LayerTrace a;
  a.full_name = "x";
  a.forward_count = 2;
  a.latency_ms = 1.0;
  a.latency_ms_min = 1.0;
  a.latency_ms_max = 3.0;
  a.latency_ms_mean = 2.0;
  a.has_nan = true;
  LayerTrace b = a;
  b.forward_count = 2;
  b.latency_ms = 5.0;
  b.latency_ms_min = 4.0;
  b.latency_ms_max = 6.0;
  b.latency_ms_mean = 5.0;
  b.has_nan = false;
  LayerTrace c;
  c.full_name = "new";
  TraceRecord before, after;
  before.layers = {a};
  after.layers = {c, b};
  TraceRecord m = MergeRecords(before, after);
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].full_name, "x");
  EXPECT_EQ(m.layers[0].forward_count, 4);
  EXPECT_EQ(m.layers[0].latency_ms, 5.0);
  EXPECT_EQ(m.layers[0].latency_ms_min, 1.0);
  EXPECT_EQ(m.layers[0].latency_ms_max, 6.0);
  EXPECT_EQ(m.layers[0].latency_ms_mean, 3.5);
  EXPECT_TRUE(m.layers[0].has_nan);
  EXPECT_EQ(m.layers[1].full_name, "new");
}

}  // namespace
}  // namespace tracetorch::daemon
