#include "protocol/session_info_proto.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tracetorch::protocol {
namespace {

SessionInfo Sample() {
  SessionInfo s;
  s.session_id = "gpu0-4242-1";
  s.state = SessionState::kFinished;
  s.identity.pid = 4242;
  s.identity.host = "gpu0";
  s.identity.rank = 3;
  s.identity.job_id = "job-7";
  s.identity.model_name = "Decoder";
  s.identity.torch_version = "2.11.0";
  s.started = absl::FromUnixNanos(1'700'000'000'123'456'789);
  s.ended = absl::FromUnixNanos(1'700'000'100'000'000'001);
  s.events = 1000;
  s.dropped_events = 7;
  s.rejected_events = 2;
  s.peer_uid = 1000;
  s.peer_gid = 100;
  s.peer_pid = 4242;
  s.flight.recorder = true;
  s.flight.position = "step 12, backward, in encoder.layers.5";
  s.flight.step = 12;
  s.flight.phase = "backward";
  s.flight.layer = "encoder.layers.5";
  s.flight.moved = absl::FromUnixNanos(1'700'000'050'000'000'000);
  s.flight.since = absl::FromUnixNanos(1'700'000'049'999'999'999);
  s.flight.stalled = true;
  s.flight.stalled_since = absl::FromUnixNanos(1'700'000'060'000'000'000);
  s.flight.stall_threshold = absl::Milliseconds(12500);
  s.flight.median_step = absl::Microseconds(41667);
  s.flight.stalls = 2;
  s.flight.exit = ProcessExit{.known = true, .signal = 9, .description = "killed by SIGKILL"};
  s.flight.bundles = 1;
  s.nan_origin = NanOrigin{"encoder.layers.5.attn", 11, true};
  s.nan_found = absl::FromUnixNanos(1'700'000'040'000'000'000);
  return s;
}

std::string Wire(const SessionInfo& s) {
  v1::SessionInfo m;
  ToProto(s, &m);
  return m.SerializeAsString();
}

TEST(SessionInfoProto, RoundTripKeepsEveryField) {
  const SessionInfo s = Sample();
  v1::SessionInfo m;
  ToProto(s, &m);
  EXPECT_EQ(m.state(), v1::SESSION_STATE_FINISHED);
  EXPECT_EQ(m.started_unix_ns(), 1'700'000'000'123'456'789);
  EXPECT_EQ(m.flight().stall_threshold_s(), 12.5);
  EXPECT_EQ(m.flight().exit().signal(), 9);
  EXPECT_EQ(m.flight().nan_origin().layer(), "encoder.layers.5.attn");
  EXPECT_EQ(m.flight().nan_found_unix_ns(), 1'700'000'040'000'000'000);

  const SessionInfo back = FromProto(m);
  EXPECT_EQ(back.session_id, s.session_id);
  EXPECT_EQ(back.state, s.state);
  EXPECT_EQ(back.identity.rank, 3);
  EXPECT_EQ(back.identity.job_id, "job-7");
  EXPECT_EQ(back.started, s.started);
  EXPECT_EQ(back.ended, s.ended);
  EXPECT_EQ(back.events, 1000u);
  EXPECT_EQ(back.dropped_events, 7u);
  EXPECT_EQ(back.rejected_events, 2u);
  EXPECT_EQ(back.peer_uid, 1000);
  EXPECT_EQ(back.peer_gid, 100);
  EXPECT_EQ(back.peer_pid, 4242);
  EXPECT_EQ(back.flight, s.flight);
  ASSERT_TRUE(back.nan_origin.has_value());
  EXPECT_EQ(back.nan_origin->layer, "encoder.layers.5.attn");
  EXPECT_EQ(back.nan_origin->step, 11);
  EXPECT_EQ(back.nan_found, s.nan_found);
  EXPECT_EQ(Wire(back), m.SerializeAsString());
}

TEST(SessionInfoProto, UnsetTimesAndAQuietFlightStayUnset) {
  SessionInfo s;
  s.session_id = "a";
  s.started = absl::FromUnixNanos(5);
  v1::SessionInfo m;
  ToProto(s, &m);
  EXPECT_EQ(m.state(), v1::SESSION_STATE_LIVE);
  EXPECT_EQ(m.ended_unix_ns(), 0);
  EXPECT_FALSE(m.flight().recorder());
  EXPECT_EQ(m.flight().moved_unix_ns(), 0);
  EXPECT_FALSE(m.flight().has_nan_origin());
  const SessionInfo back = FromProto(m);
  EXPECT_EQ(back.ended, absl::InfinitePast());
  EXPECT_EQ(back.nan_found, absl::InfinitePast());
  EXPECT_FALSE(back.nan_origin.has_value());
  EXPECT_EQ(back.flight, FlightStatus{});
  EXPECT_EQ(Wire(back), m.SerializeAsString());
}

TEST(SessionInfoProto, UnspecifiedStateReadsAsAborted) {
  EXPECT_EQ(FromProto(v1::SESSION_STATE_UNSPECIFIED), SessionState::kAborted);
  for (SessionState s : {SessionState::kLive, SessionState::kFinished, SessionState::kAborted}) {
    EXPECT_EQ(FromProto(ToProto(s)), s);
  }
}

TEST(SessionInfoProto, SnapshotCarriesRecordAndHistory) {
  Snapshot snap;
  snap.session = Sample();
  snap.record.metadata.model_name = "Decoder";
  LayerTrace l;
  l.name = "fc";
  l.full_name = "head.fc";
  l.forward_count = 4;
  snap.record.layers.push_back(l);
  LayerSteps h{.full_name = "head.fc",
               .steps = {1, 2},
               .latency_ms = {0.5, 0.25},
               .output_std = {1.0, std::numeric_limits<double>::quiet_NaN()},
               .grad_norm = {0.1, 0.2},
               .non_finite = {false, true}};
  snap.history.layers.push_back(h);
  v1::Snapshot m;
  ToProto(snap, &m);
  ASSERT_EQ(m.history_size(), 1);
  EXPECT_EQ(m.history(0).steps_size(), 2);
  EXPECT_TRUE(m.history(0).non_finite(1));
  EXPECT_EQ(m.record().layers(0).full_name(), "head.fc");
  const Snapshot back = FromProto(m);
  EXPECT_EQ(back.session.session_id, snap.session.session_id);
  ASSERT_EQ(back.record.layers.size(), 1u);
  EXPECT_EQ(back.record.layers[0].forward_count, 4);
  ASSERT_EQ(back.history.layers.size(), 1u);
  EXPECT_EQ(back.history.layers[0].steps, h.steps);
  EXPECT_TRUE(std::isnan(back.history.layers[0].output_std[1]));
  v1::Snapshot again;
  ToProto(back, &again);
  EXPECT_EQ(again.SerializeAsString(), m.SerializeAsString());
}

TEST(SessionInfoProto, IndexRoundTripsThroughJson) {
  SessionIndexEntry a{
      .info = Sample(), .client_dropped_events = 3, .lost_events = 4, .last_sequence = 99};
  SessionIndexEntry b;
  b.info.session_id = "b";
  b.info.started = absl::FromUnixNanos(7);
  absl::StatusOr<std::string> json = SessionIndexToJson({a, b});
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_NE(json->find("\"session_id\": \"gpu0-4242-1\""), std::string::npos) << *json;
  absl::StatusOr<std::vector<SessionIndexEntry>> back = SessionIndexFromJson(*json);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].last_sequence, 99u);
  EXPECT_EQ((*back)[0].lost_events, 4u);
  EXPECT_EQ((*back)[0].client_dropped_events, 3u);
  EXPECT_EQ(Wire((*back)[0].info), Wire(a.info));
  EXPECT_EQ((*back)[1].info.session_id, "b");
  EXPECT_EQ(*SessionIndexToJson(*back), *json);

  absl::StatusOr<std::string> one = IndexEntryToJson(a);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->find('\n'), std::string::npos);  // One line: a snapshot file's metadata value.
  absl::StatusOr<SessionIndexEntry> entry = IndexEntryFromJson(*one);
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ(Wire(entry->info), Wire(a.info));
}

TEST(SessionInfoProto, IndexJsonIgnoresUnknownFieldsAndRefusesOtherText) {
  absl::StatusOr<std::vector<SessionIndexEntry>> newer = SessionIndexFromJson(
      R"({"sessions": [{"info": {"session_id": "x", "state": "SESSION_STATE_LIVE"},)"
      R"( "added_later": 5}], "also_new": true})");
  ASSERT_TRUE(newer.ok()) << newer.status();
  ASSERT_EQ(newer->size(), 1u);
  EXPECT_EQ((*newer)[0].info.state, SessionState::kLive);

  absl::StatusOr<std::vector<SessionIndexEntry>> bad = SessionIndexFromJson("[1, 2");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("not a tracetorchd session index"), std::string::npos);
  EXPECT_EQ(IndexEntryFromJson("{\"info\": 3}").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::protocol
