#include "protocol/watch_state.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace tracetorch::protocol {
namespace {

v1::LayerTrace Layer(const std::string& full_name, double latency) {
  v1::LayerTrace layer;
  layer.set_full_name(full_name);
  layer.set_name(full_name);
  layer.set_type("Linear");
  layer.set_latency_ms_mean(latency);
  return layer;
}

v1::LayerHistory History(const std::string& full_name, std::initializer_list<double> latencies) {
  v1::LayerHistory history;
  history.set_full_name(full_name);
  uint64_t step = 0;
  for (double latency : latencies) {
    history.add_steps(step++);
    history.add_latency_ms(latency);
  }
  return history;
}

v1::WatchUpdate Full(uint64_t sequence) {
  v1::WatchUpdate update;
  update.set_sequence(sequence);
  v1::Snapshot* full = update.mutable_full();
  full->mutable_session()->set_session_id("s1");
  full->mutable_session()->set_events(10);
  full->mutable_record()->mutable_metadata()->set_model_name("Net");
  *full->mutable_record()->add_layers() = Layer("fc1", 1.0);
  *full->mutable_record()->add_layers() = Layer("fc2", 2.0);
  v1::Anomaly* anomaly = full->mutable_record()->add_warnings();
  anomaly->set_type(v1::ANOMALY_TYPE_DEAD_LAYER);
  anomaly->set_layer("fc1");
  *full->add_history() = History("fc1", {1.0});
  *full->add_history() = History("fc2", {2.0});
  return update;
}

TEST(WatchState, StartsEmpty) {
  WatchState state;
  EXPECT_FALSE(state.has_snapshot());
  EXPECT_FALSE(state.has_job());
  EXPECT_FALSE(state.ended().has_value());
  EXPECT_FALSE(state.shutdown());
  EXPECT_EQ(state.updates(), 0u);
  EXPECT_EQ(state.last_sequence(), 0u);
}

TEST(WatchState, FullReplacesEverything) {
  WatchState state;
  ASSERT_TRUE(state.Apply(Full(1)).ok());
  v1::WatchUpdate second;
  second.set_sequence(2);
  second.mutable_full()->mutable_session()->set_session_id("s1");
  *second.mutable_full()->mutable_record()->add_layers() = Layer("other", 5.0);
  ASSERT_TRUE(state.Apply(second).ok());
  ASSERT_TRUE(state.has_snapshot());
  ASSERT_EQ(state.snapshot().record().layers_size(), 1);
  EXPECT_EQ(state.snapshot().record().layers(0).full_name(), "other");
  EXPECT_EQ(state.snapshot().history_size(), 0);
  EXPECT_EQ(state.snapshot().record().warnings_size(), 0);
  EXPECT_EQ(state.last_sequence(), 2u);
  EXPECT_EQ(state.updates(), 2u);
}

TEST(WatchState, DeltaBeforeFullIsFailedPrecondition) {
  WatchState state;
  v1::WatchUpdate delta;
  delta.set_sequence(1);
  *delta.mutable_delta()->mutable_record()->add_layers() = Layer("fc1", 1.0);
  absl::Status status = state.Apply(delta);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_FALSE(state.has_snapshot());
  EXPECT_EQ(state.updates(), 0u);
}

TEST(WatchState, EmptyUpdateIsInvalidArgument) {
  WatchState state;
  v1::WatchUpdate empty;
  empty.set_sequence(4);
  EXPECT_EQ(state.Apply(empty).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state.updates(), 0u);
  EXPECT_EQ(state.last_sequence(), 0u);
}

TEST(WatchState, DeltaMergesLayersAndHistoryByFullName) {
  WatchState state;
  ASSERT_TRUE(state.Apply(Full(1)).ok());
  v1::WatchUpdate delta;
  delta.set_sequence(3);
  v1::Snapshot* d = delta.mutable_delta();
  d->mutable_session()->set_session_id("s1");
  d->mutable_session()->set_events(25);
  d->mutable_record()->mutable_metadata()->set_model_name("Net");
  *d->mutable_record()->add_layers() = Layer("fc2", 7.0);  // Changed.
  *d->mutable_record()->add_layers() = Layer("fc3", 3.0);  // New.
  *d->add_history() = History("fc2", {2.0, 7.0});
  *d->add_history() = History("fc3", {3.0});
  ASSERT_TRUE(state.Apply(delta).ok());

  const v1::Snapshot& snap = state.snapshot();
  ASSERT_EQ(snap.record().layers_size(), 3);
  EXPECT_EQ(snap.record().layers(0).full_name(), "fc1");
  EXPECT_DOUBLE_EQ(snap.record().layers(0).latency_ms_mean(), 1.0);  // Untouched.
  EXPECT_EQ(snap.record().layers(1).full_name(), "fc2");             // Same position.
  EXPECT_DOUBLE_EQ(snap.record().layers(1).latency_ms_mean(), 7.0);
  EXPECT_EQ(snap.record().layers(2).full_name(), "fc3");
  ASSERT_EQ(snap.history_size(), 3);
  EXPECT_EQ(snap.history(0).latency_ms_size(), 1);
  EXPECT_EQ(snap.history(1).full_name(), "fc2");
  EXPECT_EQ(snap.history(1).latency_ms_size(), 2);
  EXPECT_EQ(snap.history(2).full_name(), "fc3");
  EXPECT_EQ(snap.session().events(), 25u);
  EXPECT_EQ(state.last_sequence(), 3u);  // A gap is fine: coalesced states.
}

// A history entry with every field, one point per step.
v1::LayerHistory Points(const std::string& full_name, std::initializer_list<uint64_t> steps,
                        double latency_base, bool append) {
  v1::LayerHistory history;
  history.set_full_name(full_name);
  history.set_append(append);
  for (uint64_t step : steps) {
    history.add_steps(step);
    history.add_latency_ms(latency_base + static_cast<double>(step));
    history.add_output_std(0.5);
    history.add_grad_norm(2.0 * static_cast<double>(step));
    history.add_non_finite(step == 13);
  }
  return history;
}

v1::WatchUpdate HistoryDelta(uint64_t sequence, std::vector<v1::LayerHistory> entries) {
  v1::WatchUpdate update;
  update.set_sequence(sequence);
  v1::Snapshot* d = update.mutable_delta();
  d->mutable_session()->set_session_id("s1");
  d->mutable_session()->set_events(99);
  for (v1::LayerHistory& h : entries) *d->add_history() = std::move(h);
  return update;
}

v1::WatchUpdate FullWithHistory() {
  v1::WatchUpdate update = Full(1);
  v1::Snapshot* full = update.mutable_full();
  *full->mutable_history(0) = Points("fc1", {0, 1, 2, 3}, 10.0, false);
  *full->mutable_history(1) = Points("fc2", {0, 2}, 20.0, false);
  return update;
}

TEST(WatchState, AppendedHistoryContinuesTheCopyFromItsFirstStep) {
  WatchState state;
  ASSERT_TRUE(state.Apply(FullWithHistory()).ok());
  // fc1: step 3 was updated and 4, 5 are new; fc2: a step past the copy's end.
  v1::WatchUpdate delta =
      HistoryDelta(2, {Points("fc1", {3, 4, 5}, 100.0, true), Points("fc2", {7}, 200.0, true)});
  ASSERT_TRUE(state.Apply(delta).ok());

  const v1::Snapshot& snap = state.snapshot();
  ASSERT_EQ(snap.history_size(), 2);
  v1::LayerHistory want1 = Points("fc1", {0, 1, 2}, 10.0, false);
  const v1::LayerHistory tail1 = Points("fc1", {3, 4, 5}, 100.0, false);
  want1.MergeFrom(tail1);  // Repeated fields concatenate; full_name and append stay.
  EXPECT_EQ(snap.history(0).SerializeAsString(), want1.SerializeAsString())
      << snap.history(0).DebugString();
  v1::LayerHistory want2 = Points("fc2", {0, 2}, 20.0, false);
  want2.MergeFrom(Points("fc2", {7}, 200.0, false));
  EXPECT_EQ(snap.history(1).SerializeAsString(), want2.SerializeAsString())
      << snap.history(1).DebugString();
  EXPECT_FALSE(snap.history(0).append());  // The copy is a plain history.
  EXPECT_EQ(snap.session().events(), 99u);
  EXPECT_EQ(snap.record().layers_size(), 2);  // No layers in the delta: kept.

  // Starting before the copy's first step: the whole copy is replaced by the points sent.
  ASSERT_TRUE(state.Apply(HistoryDelta(3, {Points("fc2", {0}, 300.0, true)})).ok());
  EXPECT_EQ(state.snapshot().history(1).SerializeAsString(),
            Points("fc2", {0}, 300.0, false).SerializeAsString());
  // No points: nothing changes.
  ASSERT_TRUE(state.Apply(HistoryDelta(4, {Points("fc2", {}, 0.0, true)})).ok());
  EXPECT_EQ(state.snapshot().history(1).steps_size(), 1);
}

TEST(WatchState, WholeHistoryInADeltaReplacesTheCopy) {
  WatchState state;
  ASSERT_TRUE(state.Apply(FullWithHistory()).ok());
  v1::WatchUpdate delta =
      HistoryDelta(2, {Points("fc1", {64, 96}, 1.0, false), Points("fc3", {5, 6}, 3.0, false)});
  ASSERT_TRUE(state.Apply(delta).ok());
  const v1::Snapshot& snap = state.snapshot();
  ASSERT_EQ(snap.history_size(), 3);
  EXPECT_EQ(snap.history(0).SerializeAsString(),
            Points("fc1", {64, 96}, 1.0, false).SerializeAsString());
  EXPECT_EQ(snap.history(1).full_name(), "fc2");
  EXPECT_EQ(snap.history(2).SerializeAsString(),
            Points("fc3", {5, 6}, 3.0, false).SerializeAsString());
}

TEST(WatchState, AppendToAHistoryNotHeldIsFailedPreconditionAndChangesNothing) {
  WatchState state;
  ASSERT_TRUE(state.Apply(FullWithHistory()).ok());
  const std::string before = state.snapshot().SerializeAsString();
  v1::WatchUpdate delta =
      HistoryDelta(2, {Points("fc1", {4}, 1.0, true), Points("fc9", {4}, 1.0, true)});
  *delta.mutable_delta()->mutable_record()->add_layers() = Layer("fc1", 50.0);
  absl::Status status = state.Apply(delta);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("fc9"), std::string::npos) << status;
  EXPECT_EQ(state.snapshot().SerializeAsString(), before);  // Not even fc1 or the session.
  EXPECT_EQ(state.updates(), 1u);
  EXPECT_EQ(state.last_sequence(), 1u);

  // A whole entry earlier in the same delta makes the layer held.
  ASSERT_TRUE(state
                  .Apply(HistoryDelta(
                      3, {Points("fc9", {1, 2}, 1.0, false), Points("fc9", {2, 3}, 5.0, true)}))
                  .ok());
  v1::LayerHistory want = Points("fc9", {1}, 1.0, false);
  want.MergeFrom(Points("fc9", {2, 3}, 5.0, false));
  EXPECT_EQ(state.snapshot().history(2).SerializeAsString(), want.SerializeAsString());
}

TEST(WatchState, AppendWithFieldsOfDifferentLengthsIsInvalidArgument) {
  WatchState state;
  ASSERT_TRUE(state.Apply(FullWithHistory()).ok());
  const std::string before = state.snapshot().SerializeAsString();
  v1::LayerHistory bad = Points("fc1", {4, 5}, 1.0, true);
  bad.mutable_grad_norm()->RemoveLast();
  absl::Status status = state.Apply(HistoryDelta(2, {bad}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(state.snapshot().SerializeAsString(), before);
}

// thin_before_step: the copy is thinned as the daemon thinned its own (even positions among the
// points before that step kept, every field alike), then the points sent are appended.
TEST(WatchState, AppendWithThinBeforeStepThinsTheCopyFirst) {
  WatchState state;
  v1::WatchUpdate full = Full(1);
  *full.mutable_full()->mutable_history(0) =
      Points("fc1", {0, 1, 2, 3, 4, 5, 6, 13, 14}, 10.0, false);
  ASSERT_TRUE(state.Apply(full).ok());
  // Points before step 6 (positions 0..5): 0, 2, 4 kept; 6 on kept; 14 changed, 15 new.
  v1::LayerHistory tail = Points("fc1", {14, 15}, 100.0, true);
  tail.set_thin_before_step(6);
  ASSERT_TRUE(state.Apply(HistoryDelta(2, {tail})).ok());
  v1::LayerHistory want = Points("fc1", {0, 2, 4, 6, 13}, 10.0, false);
  want.MergeFrom(Points("fc1", {14, 15}, 100.0, false));
  EXPECT_EQ(state.snapshot().history(0).SerializeAsString(), want.SerializeAsString())
      << state.snapshot().history(0).DebugString();
  EXPECT_EQ(state.snapshot().history(0).thin_before_step(), 0u);  // A plain history.
  EXPECT_EQ(state.snapshot().history(1).SerializeAsString(),
            Full(1).full().history(1).SerializeAsString());  // fc2 untouched.

  // A thinning with no points to append still thins; an odd count keeps the last one before.
  v1::LayerHistory thin_only = Points("fc1", {}, 0.0, true);
  thin_only.set_thin_before_step(13);  // Before 13: 0, 2, 4, 6 -> 0, 4.
  ASSERT_TRUE(state.Apply(HistoryDelta(3, {thin_only})).ok());
  std::vector<uint64_t> steps(state.snapshot().history(0).steps().begin(),
                              state.snapshot().history(0).steps().end());
  EXPECT_EQ(steps, (std::vector<uint64_t>{0, 4, 13, 14, 15}));
  EXPECT_EQ(state.snapshot().history(0).grad_norm_size(), 5);
  EXPECT_DOUBLE_EQ(state.snapshot().history(0).latency_ms(1), 14.0);
  EXPECT_TRUE(state.snapshot().history(0).non_finite(2));  // Step 13's flag moved with it.
}

TEST(WatchState, ThinBeforeStepWithoutAppendIsInvalidArgumentAndChangesNothing) {
  WatchState state;
  ASSERT_TRUE(state.Apply(FullWithHistory()).ok());
  const std::string before = state.snapshot().SerializeAsString();
  v1::LayerHistory ok_tail = Points("fc2", {3}, 1.0, true);
  ok_tail.set_thin_before_step(2);
  v1::LayerHistory whole = Points("fc1", {8, 9}, 1.0, false);
  whole.set_thin_before_step(9);
  absl::Status status = state.Apply(HistoryDelta(2, {ok_tail, whole}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("thin_before_step"), std::string::npos) << status;
  EXPECT_EQ(state.snapshot().SerializeAsString(), before);  // Not even fc2's append.
  EXPECT_EQ(state.updates(), 1u);
}

TEST(WatchState, DeltaReplacesSessionMetadataAnomaliesAndNanOrigin) {
  WatchState state;
  ASSERT_TRUE(state.Apply(Full(1)).ok());
  v1::WatchUpdate delta;
  delta.set_sequence(2);
  v1::Snapshot* d = delta.mutable_delta();
  d->mutable_session()->set_session_id("s1");
  d->mutable_session()->set_state(v1::SESSION_STATE_LIVE);
  d->mutable_session()->set_dropped_events(3);
  v1::TraceMetadata* metadata = d->mutable_record()->mutable_metadata();
  metadata->set_model_name("Net");
  metadata->mutable_nan_origin()->set_layer("fc2");
  metadata->mutable_nan_origin()->set_step(12);
  metadata->mutable_nan_origin()->set_is_nan(true);
  v1::Anomaly* nan = d->mutable_record()->add_warnings();
  nan->set_type(v1::ANOMALY_TYPE_NAN_ACTIVATION);
  nan->set_layer("fc2");
  ASSERT_TRUE(state.Apply(delta).ok());

  const v1::Snapshot& snap = state.snapshot();
  EXPECT_EQ(snap.session().dropped_events(), 3u);
  EXPECT_EQ(snap.session().events(), 0u);  // Replaced, not merged.
  ASSERT_TRUE(snap.record().metadata().has_nan_origin());
  EXPECT_EQ(snap.record().metadata().nan_origin().layer(), "fc2");
  ASSERT_EQ(snap.record().warnings_size(), 1);  // The dead-layer anomaly is gone.
  EXPECT_EQ(snap.record().warnings(0).type(), v1::ANOMALY_TYPE_NAN_ACTIVATION);
  EXPECT_EQ(snap.record().layers_size(), 2);  // No layers in the delta: all kept.
}

TEST(WatchState, SessionEndedAndShutdownAreRecordedAndKeepTheSnapshot) {
  WatchState state;
  ASSERT_TRUE(state.Apply(Full(1)).ok());
  v1::WatchUpdate ended;
  ended.set_sequence(2);
  ended.mutable_session_ended()->set_session_id("s1");
  ended.mutable_session_ended()->set_state(v1::SESSION_STATE_FINISHED);
  ASSERT_TRUE(state.Apply(ended).ok());
  ASSERT_TRUE(state.ended().has_value());
  EXPECT_EQ(state.ended()->state(), v1::SESSION_STATE_FINISHED);
  EXPECT_EQ(state.snapshot().record().layers_size(), 2);
  EXPECT_EQ(state.snapshot().session().events(), 10u);
  EXPECT_FALSE(state.shutdown());

  v1::WatchUpdate shutdown;
  shutdown.set_sequence(3);
  shutdown.mutable_shutdown();
  ASSERT_TRUE(state.Apply(shutdown).ok());
  EXPECT_TRUE(state.shutdown());
  EXPECT_EQ(state.snapshot().record().layers_size(), 2);
  EXPECT_EQ(state.updates(), 3u);
}

TEST(WatchState, JobReplacesTheJobView) {
  WatchState state;
  v1::WatchUpdate job;
  job.set_sequence(1);
  job.mutable_job()->set_job_id("j");
  job.mutable_job()->add_ranks()->mutable_session()->set_session_id("r0");
  job.mutable_job()->add_ranks()->mutable_session()->set_session_id("r1");
  ASSERT_TRUE(state.Apply(job).ok());
  ASSERT_TRUE(state.has_job());
  EXPECT_EQ(state.job().ranks_size(), 2);
  EXPECT_FALSE(state.has_snapshot());

  v1::WatchUpdate next;
  next.set_sequence(2);
  next.mutable_job()->set_job_id("j");
  next.mutable_job()->add_ranks()->mutable_session()->set_session_id("r0");
  next.mutable_job()->add_divergences()->set_layer("fc1");
  ASSERT_TRUE(state.Apply(next).ok());
  EXPECT_EQ(state.job().ranks_size(), 1);
  EXPECT_EQ(state.job().divergences_size(), 1);
}

}  // namespace
}  // namespace tracetorch::protocol
