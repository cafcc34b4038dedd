#include "protocol/wire.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "tracetorch/v1/agent.pb.h"

namespace tracetorch::protocol::wire {
namespace {

// Splits `bytes` into frames and parses each as an AgentMessage.
std::vector<v1::AgentMessage> ParseFrames(std::string_view bytes) {
  std::vector<v1::AgentMessage> out;
  while (!bytes.empty()) {
    EXPECT_GE(bytes.size(), kFrameHeaderBytes);
    const uint32_t len = GetFrameHeader(bytes.data());
    EXPECT_GE(bytes.size(), kFrameHeaderBytes + len);
    v1::AgentMessage m;
    EXPECT_TRUE(m.ParseFromArray(bytes.data() + kFrameHeaderBytes, static_cast<int>(len)));
    out.push_back(m);
    bytes.remove_prefix(kFrameHeaderBytes + len);
  }
  return out;
}

ForwardEvent Forward(uint32_t layer, uint64_t step) {
  ForwardEvent e;
  e.layer_id = layer;
  e.step = step;
  e.latency_ms = 0.0;  // Present zero.
  WireTensor in;
  in.shape = {32, 0, 7};
  in.dtype = 15;
  in.device = -1;
  in.stats = TensorStats{-0.5, 1.25, std::nullopt, 9.0, 2, 0};
  e.inputs.push_back(in);
  WireTensor out;
  out.shape = {-1};
  out.device = 3;
  e.outputs.push_back(out);
  e.mem_alloc_delta = -4096;
  return e;
}

TEST(Wire, FrameHeaderIsLittleEndian) {
  char buf[4];
  PutFrameHeader(0x01020304u, buf);
  EXPECT_EQ(buf[0], 0x04);
  EXPECT_EQ(buf[3], 0x01);
  EXPECT_EQ(GetFrameHeader(buf), 0x01020304u);
  PutFrameHeader(0xfffffffeu, buf);
  EXPECT_EQ(GetFrameHeader(buf), 0xfffffffeu);
}

TEST(Wire, HelloMatchesGeneratedParser) {
  ProcessIdentity id;
  id.pid = 4242;
  id.host = "node-1";
  id.start_time_unix_ns = 1700000000123456789;
  id.rank = 0;  // Present zero.
  id.world_size = 8;
  id.job_id = "job";
  id.model_name = "ResNet";
  id.cuda_available = true;
  std::string out;
  HelloFields hello;
  hello.identity = &id;
  hello.resume_session_id = "abc";
  hello.dropped_events = 7;
  hello.sent_events = 1000;
  AppendHelloFrame(hello, &out);
  auto msgs = ParseFrames(out);
  ASSERT_EQ(msgs.size(), 1u);
  ASSERT_TRUE(msgs[0].has_hello());
  const v1::Hello& h = msgs[0].hello();
  EXPECT_EQ(h.protocol_version(), v1::PROTOCOL_VERSION_1);
  EXPECT_EQ(h.identity().pid(), 4242);
  EXPECT_EQ(h.identity().host(), "node-1");
  EXPECT_EQ(h.identity().start_time_unix_ns(), 1700000000123456789);
  EXPECT_TRUE(h.identity().has_rank());
  EXPECT_EQ(h.identity().rank(), 0);
  EXPECT_FALSE(h.identity().has_local_rank());
  EXPECT_EQ(h.identity().world_size(), 8);
  EXPECT_EQ(h.identity().model_name(), "ResNet");
  EXPECT_TRUE(h.identity().cuda_available());
  EXPECT_EQ(h.resume_session_id(), "abc");
  EXPECT_EQ(h.dropped_events(), 7u);
  EXPECT_EQ(h.sent_events(), 1000u);
  EXPECT_FALSE(h.has_flight_recorder());
}

TEST(Wire, HelloCarriesTheFlightRecorder) {
  ProcessIdentity id;
  HelloFields hello;
  hello.identity = &id;
  hello.flight_layout_version = 1;
  hello.flight_region_bytes = 921600;
  std::string out;
  AppendHelloFrame(hello, &out);
  auto msgs = ParseFrames(out);
  ASSERT_EQ(msgs.size(), 1u);
  ASSERT_TRUE(msgs[0].hello().has_flight_recorder());
  EXPECT_EQ(msgs[0].hello().flight_recorder().layout_version(), 1u);
  EXPECT_EQ(msgs[0].hello().flight_recorder().region_bytes(), 921600u);
  // Byte for byte what libprotobuf writes for the same message.
  v1::AgentMessage expected;
  *expected.mutable_hello() = msgs[0].hello();
  EXPECT_EQ(out.substr(kFrameHeaderBytes), expected.SerializeAsString());
}

TEST(Wire, LayerTableHeartbeatEnd) {
  std::string out;
  std::vector<LayerDecl> layers = {{0, {"fc", "Linear", "net.fc", 2, 110}},
                                   {300, {"relu", "ReLU", "net.relu", -1, 0}}};
  AppendLayerTableFrame(layers, &out);
  AppendHeartbeatFrame(-5, 3, &out);
  AppendEndFrame(0.0, 9, 1, &out);
  AppendEndFrame(std::nullopt, 0, 0, &out);
  auto msgs = ParseFrames(out);
  ASSERT_EQ(msgs.size(), 4u);
  ASSERT_EQ(msgs[0].layer_table().layers_size(), 2);
  EXPECT_EQ(msgs[0].layer_table().layers(1).id(), 300u);
  EXPECT_EQ(msgs[0].layer_table().layers(1).depth(), -1);
  EXPECT_EQ(msgs[0].layer_table().layers(0).params(), 110);
  EXPECT_EQ(msgs[0].layer_table().layers(0).full_name(), "net.fc");
  EXPECT_EQ(msgs[1].heartbeat().unix_ns(), -5);
  EXPECT_EQ(msgs[1].heartbeat().dropped_events(), 3u);
  EXPECT_TRUE(msgs[2].end().has_total_time_ms());
  EXPECT_EQ(msgs[2].end().dropped_events(), 9u);
  EXPECT_EQ(msgs[2].end().hook_errors(), 1u);
  EXPECT_TRUE(msgs[3].has_end());
  EXPECT_FALSE(msgs[3].end().has_total_time_ms());
}

TEST(Wire, EventBatchMatchesGeneratedParser) {
  std::vector<ForwardEvent> fwd = {Forward(1, 10), Forward(2, 1ull << 40)};
  BackwardEvent b;
  b.layer_id = 2;
  b.step = 10;
  b.sample.grad_norm = std::numeric_limits<double>::quiet_NaN();
  b.sample.grad_has_nan = true;
  b.sample.grad_in_mean = -0.0;
  b.sample.mem_reserved_delta = 1 << 20;
  std::vector<BackwardEvent> bwd = {b};
  NanOrigin origin{"net.fc", 4, false};
  origin.op = "div_1_3";
  origin.op_func = "div";
  origin.op_module = "net";
  BatchFields fields;
  fields.sequence = 5;
  fields.dropped_events = 11;
  fields.nan_origin = &origin;
  fields.op_graph_json = R"({"format": "tracetorch.ops", "version": 1})";
  std::string out;
  BatchResult r = AppendEventBatchFrame(fields, fwd, bwd, kDefaultMaxFrameBytes, &out);
  EXPECT_EQ(r.forward_used, 2u);
  EXPECT_EQ(r.backward_used, 1u);
  auto msgs = ParseFrames(out);
  ASSERT_EQ(msgs.size(), 1u);
  const v1::EventBatch& batch = msgs[0].events();
  EXPECT_EQ(batch.sequence(), 5u);
  EXPECT_EQ(batch.dropped_events(), 11u);
  EXPECT_EQ(batch.nan_origin().layer(), "net.fc");
  EXPECT_EQ(batch.nan_origin().step(), 4);
  EXPECT_FALSE(batch.nan_origin().is_nan());
  EXPECT_EQ(batch.nan_origin().op(), "div_1_3");
  EXPECT_EQ(batch.nan_origin().op_func(), "div");
  EXPECT_EQ(batch.nan_origin().op_module(), "net");
  EXPECT_EQ(batch.op_graph_json(), R"({"format": "tracetorch.ops", "version": 1})");
  ASSERT_EQ(batch.forward_size(), 2);
  const v1::ForwardEvent& f = batch.forward(0);
  EXPECT_EQ(f.layer_id(), 1u);
  EXPECT_EQ(f.step(), 10u);
  EXPECT_TRUE(f.has_latency_ms());
  ASSERT_EQ(f.inputs_size(), 1);
  EXPECT_EQ(f.inputs(0).shape_size(), 3);
  EXPECT_EQ(f.inputs(0).shape(0), 32);
  EXPECT_EQ(f.inputs(0).shape(1), 0);
  EXPECT_EQ(f.inputs(0).dtype(), 15);
  EXPECT_EQ(f.inputs(0).device(), -1);
  EXPECT_EQ(f.inputs(0).stats().mean(), -0.5);
  EXPECT_FALSE(f.inputs(0).stats().has_min());
  EXPECT_EQ(f.inputs(0).stats().nan_count(), 2);
  EXPECT_EQ(f.outputs(0).shape(0), -1);
  EXPECT_EQ(f.outputs(0).device(), 3);
  EXPECT_FALSE(f.outputs(0).has_stats());
  EXPECT_EQ(f.mem_alloc_delta(), -4096);
  EXPECT_FALSE(f.has_mem_reserved_delta());
  EXPECT_EQ(batch.forward(1).step(), 1ull << 40);
  ASSERT_EQ(batch.backward_size(), 1);
  const v1::BackwardEvent& bw = batch.backward(0);
  EXPECT_TRUE(std::isnan(bw.grad_norm()));
  EXPECT_TRUE(bw.grad_has_nan());
  EXPECT_TRUE(bw.has_grad_in_mean());
  EXPECT_FALSE(bw.has_grad_mean());
  EXPECT_FALSE(bw.has_latency_ms());
  EXPECT_EQ(bw.mem_reserved_delta(), 1 << 20);
}

TEST(Wire, BatchRespectsFrameLimit) {
  std::vector<ForwardEvent> fwd;
  for (int i = 0; i < 100; ++i) fwd.push_back(Forward(static_cast<uint32_t>(i), 1));
  std::string out;
  BatchFields fields;
  BatchResult r = AppendEventBatchFrame(fields, fwd, {}, 1024, &out);
  EXPECT_GT(r.forward_used, 0u);
  EXPECT_LT(r.forward_used, 100u);
  EXPECT_LE(out.size(), 1024u + kFrameHeaderBytes);
  auto msgs = ParseFrames(out);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(static_cast<size_t>(msgs[0].events().forward_size()), r.forward_used);
}

TEST(Wire, OversizedEventIsSkippedAndCounted) {
  ForwardEvent big = Forward(0, 0);
  big.inputs[0].shape.assign(500, 1 << 20);
  std::vector<ForwardEvent> fwd = {big, Forward(1, 0)};
  std::string out;
  BatchResult r = AppendEventBatchFrame({}, fwd, {}, 1024, &out);
  EXPECT_EQ(r.forward_oversized, 1u);
  EXPECT_EQ(r.forward_used, 2u);
  auto msgs = ParseFrames(out);
  ASSERT_EQ(msgs.size(), 1u);
  ASSERT_EQ(msgs[0].events().forward_size(), 1);
  EXPECT_EQ(msgs[0].events().forward(0).layer_id(), 1u);
}

BackwardEvent Backward(uint32_t layer, uint64_t step) {
  BackwardEvent b;
  b.layer_id = layer;
  b.step = step;
  b.sample.grad_norm = 0.5;
  b.sample.grad_all_zero = true;
  b.sample.mem_alloc_delta = -7;
  return b;
}

// Events encoded one at a time and wrapped later are byte for byte the batch encoder's frame.
TEST(Wire, EncodedEventsMakeTheBatchEncodersFrame) {
  std::vector<ForwardEvent> fwd = {Forward(1, 10), Forward(2, 1ull << 40)};
  std::vector<BackwardEvent> bwd = {Backward(2, 10), Backward(1, 10)};
  NanOrigin origin{"net.fc", 4, true};
  BatchFields fields;
  fields.sequence = 300;
  fields.dropped_events = 1ull << 33;
  fields.nan_origin = &origin;
  std::string expected;
  AppendEventBatchFrame(fields, fwd, bwd, kDefaultMaxFrameBytes, &expected);

  std::string events;
  size_t total = 0;
  for (const ForwardEvent& e : fwd) total += AppendForwardEventField(e, &events);
  for (const BackwardEvent& e : bwd) total += AppendBackwardEventField(e, &events);
  EXPECT_EQ(total, events.size());
  std::string out = "x";  // Appended after what is there.
  AppendEncodedEventBatchFrame(fields, events, &out);
  EXPECT_EQ(out.substr(1), expected);
  EXPECT_EQ(EncodedEventBatchPayloadBytes(fields, events.size()),
            expected.size() - kFrameHeaderBytes);
}

// Forward and backward events interleaved, as a training step makes them: the parser keeps each
// kind's order.
TEST(Wire, InterleavedEncodedEventsParse) {
  std::string events;
  AppendForwardEventField(Forward(1, 3), &events);
  AppendBackwardEventField(Backward(1, 3), &events);
  AppendForwardEventField(Forward(2, 4), &events);
  AppendBackwardEventField(Backward(2, 4), &events);
  std::string out;
  AppendEncodedEventBatchFrame({.sequence = 2}, events, &out);
  auto msgs = ParseFrames(out);
  ASSERT_EQ(msgs.size(), 1u);
  const v1::EventBatch& batch = msgs[0].events();
  EXPECT_EQ(batch.sequence(), 2u);
  ASSERT_EQ(batch.forward_size(), 2);
  ASSERT_EQ(batch.backward_size(), 2);
  EXPECT_EQ(batch.forward(0).step(), 3u);
  EXPECT_EQ(batch.forward(1).layer_id(), 2u);
  EXPECT_EQ(batch.backward(0).layer_id(), 1u);
  EXPECT_TRUE(batch.backward(0).grad_all_zero());
  EXPECT_EQ(batch.backward(1).step(), 4u);
  EXPECT_EQ(batch.backward(1).mem_alloc_delta(), -7);
}

TEST(Wire, EventFieldLengthWalksTheFields) {
  std::string events;
  const size_t a = AppendForwardEventField(Forward(1, 3), &events);
  const size_t b = AppendBackwardEventField(Backward(1, 3), &events);
  EXPECT_EQ(EventFieldLength(events), a);
  EXPECT_EQ(EventFieldLength(std::string_view(events).substr(a)), b);
  EXPECT_EQ(EventFieldLength(std::string_view(events).substr(0, a - 1)), 0u);  // Cut short.
  EXPECT_EQ(EventFieldLength(""), 0u);
  EXPECT_EQ(EventFieldLength("\x08\x01"), 0u);  // A varint field, not an event.
}

TEST(Wire, ReplayFieldsAreProto3Optional) {
  ProcessIdentity id;
  HelloFields hello;
  hello.identity = &id;
  hello.replay_first_event = 0;  // Present zero: an agent that re-sends, holding from the start.
  std::string out;
  AppendHelloFrame(hello, &out);
  BatchFields fields;
  fields.sequence = 3;
  fields.first_event = 0;
  std::vector<ForwardEvent> fwd = {Forward(1, 0)};
  AppendEventBatchFrame(fields, fwd, {}, 1 << 20, &out);
  fields.first_event.reset();
  AppendEventBatchFrame(fields, fwd, {}, 1 << 20, &out);
  auto msgs = ParseFrames(out);
  ASSERT_EQ(msgs.size(), 3u);
  ASSERT_TRUE(msgs[0].hello().has_replay_first_event());
  EXPECT_EQ(msgs[0].hello().replay_first_event(), 0u);
  ASSERT_TRUE(msgs[1].events().has_first_event());
  EXPECT_EQ(msgs[1].events().first_event(), 0u);
  EXPECT_FALSE(msgs[2].events().has_first_event());
}

TEST(Wire, ParsesDaemonReplies) {
  v1::DaemonMessage welcome;
  welcome.mutable_welcome()->set_session_id("20240101T000000Z-host-1-1");
  welcome.mutable_welcome()->set_resumed(true);
  absl::StatusOr<DaemonReply> r = ParseDaemonReply(welcome.SerializeAsString());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kind, DaemonReply::Kind::kWelcome);
  EXPECT_EQ(r->session_id, "20240101T000000Z-host-1-1");
  EXPECT_TRUE(r->resumed);
  EXPECT_FALSE(r->durable_sequence.has_value()) << "an older daemon's Welcome acknowledges nothing";

  welcome.mutable_welcome()->set_durable_sequence(0);  // Present zero: nothing durable yet.
  welcome.mutable_welcome()->set_durable_events(17);
  r = ParseDaemonReply(welcome.SerializeAsString());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->durable_sequence.has_value());
  EXPECT_EQ(*r->durable_sequence, 0u);
  EXPECT_EQ(r->durable_events, 17u);

  v1::DaemonMessage durable;
  durable.mutable_durable()->set_sequence(42);
  durable.mutable_durable()->set_events(4096);
  r = ParseDaemonReply(durable.SerializeAsString());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kind, DaemonReply::Kind::kDurable);
  EXPECT_EQ(r->durable_sequence, 42u);
  EXPECT_EQ(r->durable_events, 4096u);

  v1::DaemonMessage error;
  error.mutable_error()->set_message("too big");
  error.mutable_error()->set_code(8);
  error.mutable_error()->set_fatal(true);
  r = ParseDaemonReply(error.SerializeAsString());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, DaemonReply::Kind::kError);
  EXPECT_EQ(r->message, "too big");
  EXPECT_EQ(r->code, 8);
  EXPECT_TRUE(r->fatal);

  EXPECT_EQ(ParseDaemonReply("\x0a\x05"
                             "ab")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDaemonReply("\xff").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::protocol::wire
