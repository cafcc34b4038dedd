#include "protocol/agent_proto.h"

#include <string>

#include "gtest/gtest.h"
#include "protocol/frame_decoder.h"
#include "protocol/wire.h"
#include "tracetorch/v1/agent.pb.h"

namespace tracetorch::protocol {
namespace {

v1::Hello FullHello() {
  v1::Hello h;
  h.set_protocol_version(v1::PROTOCOL_VERSION_1);
  v1::ProcessIdentity* id = h.mutable_identity();
  id->set_pid(42);
  id->set_host("box");
  id->set_start_time_unix_ns(1234567);
  id->set_rank(0);  // Set to zero: must stay set.
  id->set_world_size(8);
  id->set_job_id("job");
  id->set_model_name("Net");
  id->set_torch_version("2.1");
  id->set_python_version("3.11");
  id->set_platform("linux");
  id->set_cuda_available(true);
  id->set_cuda_version("12.1");
  id->set_active_device("cuda:0");
  h.set_resume_session_id("s-1");
  h.set_dropped_events(3);
  h.set_sent_events(99);
  h.set_replay_first_event(0);
  h.mutable_flight_recorder()->set_layout_version(2);
  h.mutable_flight_recorder()->set_region_bytes(4096);
  return h;
}

TEST(AgentProto, HelloRoundTripsFieldForField) {
  const v1::Hello in = FullHello();
  const Hello plain = FromProto(in);
  EXPECT_EQ(plain.protocol_version, 1);
  EXPECT_EQ(plain.identity.pid, 42);
  EXPECT_EQ(plain.identity.rank, 0);
  EXPECT_FALSE(plain.identity.local_rank.has_value());
  EXPECT_EQ(plain.identity.world_size, 8);
  EXPECT_EQ(plain.identity.active_device, "cuda:0");
  EXPECT_EQ(plain.resume_session_id, "s-1");
  EXPECT_EQ(plain.sent_events, 99u);
  EXPECT_EQ(plain.replay_first_event, 0u);
  EXPECT_TRUE(plain.flight_recorder);
  EXPECT_EQ(plain.flight_layout_version, 2u);
  EXPECT_EQ(plain.flight_region_bytes, 4096u);
  v1::Hello back;
  ToProto(plain, &back);
  EXPECT_EQ(back.SerializeAsString(), in.SerializeAsString());
}

TEST(AgentProto, AbsentOptionalFieldsStayAbsent) {
  v1::Hello in;
  in.mutable_identity()->set_pid(1);
  const Hello plain = FromProto(in);
  EXPECT_FALSE(plain.identity.rank.has_value());
  EXPECT_FALSE(plain.replay_first_event.has_value());
  EXPECT_FALSE(plain.flight_recorder);
  v1::Hello back;
  ToProto(plain, &back);
  EXPECT_FALSE(back.identity().has_rank());
  EXPECT_FALSE(back.has_replay_first_event());
  EXPECT_FALSE(back.has_flight_recorder());
  EXPECT_EQ(back.SerializeAsString(), in.SerializeAsString());
}

TEST(AgentProto, LayerTableAndEndRoundTrip) {
  v1::LayerTable table;
  v1::LayerDecl* d = table.add_layers();
  d->set_id(7);
  d->set_name("fc");
  d->set_type("Linear");
  d->set_full_name("net.fc");
  d->set_depth(2);
  d->set_params(100);
  table.add_layers()->set_id(3);
  const std::vector<LayerDecl> layers = FromProto(table);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].id, 7u);
  EXPECT_EQ(layers[0].info.full_name, "net.fc");
  EXPECT_EQ(layers[0].info.params, 100);
  EXPECT_EQ(layers[1].id, 3u);
  v1::LayerTable back;
  ToProto(layers, &back);
  EXPECT_EQ(back.SerializeAsString(), table.SerializeAsString());

  v1::End end;
  end.set_total_time_ms(0.0);
  end.set_hook_errors(2);
  const End e = FromProto(end);
  EXPECT_EQ(e.total_time_ms, 0.0);
  EXPECT_EQ(e.hook_errors, 2u);
  EXPECT_FALSE(FromProto(v1::End()).total_time_ms.has_value());
  v1::End end_back;
  ToProto(e, &end_back);
  EXPECT_EQ(end_back.SerializeAsString(), end.SerializeAsString());
}

TEST(AgentProto, DecodesEachKindOfMessage) {
  v1::AgentMessage m;
  *m.mutable_hello() = FullHello();
  absl::StatusOr<AgentMessage> got = DecodeAgentMessage(m.SerializeAsString());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->kind, AgentMessage::Kind::kHello);
  EXPECT_EQ(got->hello.identity.host, "box");

  m.mutable_heartbeat()->set_dropped_events(5);
  got = DecodeAgentMessage(m.SerializeAsString());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kind, AgentMessage::Kind::kHeartbeat);
  EXPECT_EQ(got->heartbeat.dropped_events, 5u);

  m.mutable_end()->set_dropped_events(6);
  got = DecodeAgentMessage(m.SerializeAsString());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kind, AgentMessage::Kind::kEnd);
  EXPECT_EQ(got->end.dropped_events, 6u);

  m.mutable_layer_table()->add_layers()->set_full_name("a");
  got = DecodeAgentMessage(m.SerializeAsString());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kind, AgentMessage::Kind::kLayerTable);
  ASSERT_EQ(got->layers.size(), 1u);
  EXPECT_EQ(got->layers[0].info.full_name, "a");

  m.mutable_events()->set_sequence(9);
  m.mutable_events()->add_forward()->set_layer_id(4);
  got = DecodeAgentMessage(m.SerializeAsString());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kind, AgentMessage::Kind::kEvents);
  EXPECT_EQ(got->events, m.events().SerializeAsString());

  got = DecodeAgentMessage(v1::AgentMessage().SerializeAsString());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kind, AgentMessage::Kind::kNone);
}

TEST(AgentProto, RefusesBytesThatAreNotAMessage) {
  EXPECT_EQ(DecodeAgentMessage("\xff\xff\xff").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AgentProto, DaemonFramesReadBackAndMatchTheGeneratedEncoding) {
  wire::DaemonReply welcome;
  welcome.kind = wire::DaemonReply::Kind::kWelcome;
  welcome.session_id = "s-1";
  welcome.resumed = true;
  welcome.durable_sequence = 0;
  welcome.durable_events = 12;
  wire::DaemonReply error;
  error.kind = wire::DaemonReply::Kind::kError;
  error.message = "no";
  error.code = 3;
  error.fatal = true;
  wire::DaemonReply durable;
  durable.kind = wire::DaemonReply::Kind::kDurable;
  durable.durable_sequence = 4;
  durable.durable_events = 40;
  for (const wire::DaemonReply& r : {welcome, error, durable}) {
    std::string frame = "x";  // Appended to, not replaced.
    AppendDaemonFrame(r, &frame);
    ASSERT_GE(frame.size(), 1 + wire::kFrameHeaderBytes);
    EXPECT_EQ(wire::GetFrameHeader(frame.data() + 1), frame.size() - 1 - wire::kFrameHeaderBytes);
    const std::string payload = frame.substr(1 + wire::kFrameHeaderBytes);
    absl::StatusOr<wire::DaemonReply> back = wire::ParseDaemonReply(payload);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->kind, r.kind);
    EXPECT_EQ(back->session_id, r.session_id);
    EXPECT_EQ(back->resumed, r.resumed);
    EXPECT_EQ(back->durable_sequence, r.durable_sequence);
    EXPECT_EQ(back->durable_events, r.durable_events);
    EXPECT_EQ(back->message, r.message);
    EXPECT_EQ(back->code, r.code);
    EXPECT_EQ(back->fatal, r.fatal);
    v1::DaemonMessage m;
    ToProto(r, &m);
    EXPECT_EQ(payload, m.SerializeAsString());
  }
  // A Welcome without a durable point (a daemon that persists nothing) says none.
  wire::DaemonReply bare;
  bare.kind = wire::DaemonReply::Kind::kWelcome;
  v1::DaemonMessage m;
  ToProto(bare, &m);
  EXPECT_TRUE(m.has_welcome());
  EXPECT_FALSE(m.welcome().has_durable_sequence());
}

TEST(AgentProto, FindsTheEventBatchOfAnEventsOnlyMessage) {
  v1::AgentMessage m;
  m.mutable_events()->set_sequence(3);
  m.mutable_events()->add_backward()->set_layer_id(1);
  const std::string bytes = m.SerializeAsString();
  std::optional<std::string_view> batch = wire::EventBatchOfMessage(bytes);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(*batch, m.events().SerializeAsString());
  // Anything else is left to the full parser: another kind, trailing bytes, a short length.
  EXPECT_FALSE(wire::EventBatchOfMessage(bytes + "\x08\x01").has_value());
  EXPECT_FALSE(wire::EventBatchOfMessage(bytes.substr(0, bytes.size() - 1)).has_value());
  m.mutable_heartbeat()->set_unix_ns(1);
  EXPECT_FALSE(wire::EventBatchOfMessage(m.SerializeAsString()).has_value());
}

}  // namespace
}  // namespace tracetorch::protocol
