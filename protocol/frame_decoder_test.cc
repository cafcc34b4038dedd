#include "protocol/frame_decoder.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "protocol/testing/decoder_oracle.h"
#include "protocol/wire.h"
#include "tracetorch/v1/agent.pb.h"

namespace tracetorch::protocol::wire {
namespace {

using testing::DecoderDisagreement;

// An EventBatch with a bit of everything the agent sends.
v1::EventBatch Rich() {
  v1::EventBatch b;
  b.set_sequence(41);
  b.set_dropped_events(7);
  for (int i = 0; i < 3; ++i) {
    v1::ForwardEvent* f = b.add_forward();
    f->set_layer_id(static_cast<uint32_t>(i));
    f->set_step(1000 + static_cast<uint64_t>(i));
    if (i != 1) f->set_latency_ms(0.25 * i);
    v1::TensorEvent* in = f->add_inputs();
    in->add_shape(32);
    in->add_shape(-1);
    in->set_dtype(15);
    in->set_device(-1);
    v1::TensorEvent* out = f->add_outputs();
    out->add_shape(4);
    out->set_device(3);
    out->mutable_stats()->set_mean(-0.5);
    out->mutable_stats()->set_std(i == 2 ? std::numeric_limits<double>::quiet_NaN() : 1.5);
    out->mutable_stats()->set_nan_count(i == 2 ? 3 : 0);
    out->mutable_stats()->set_inf_count(i == 0 ? 1 : 0);
    if (i == 0) f->set_mem_alloc_delta(-4096);
    if (i == 2) f->set_mem_reserved_delta(1 << 20);
  }
  v1::BackwardEvent* g = b.add_backward();
  g->set_layer_id(2);
  g->set_step(9);
  g->set_latency_ms(0.0);  // Present zero.
  g->set_grad_norm(2.0);
  g->set_grad_in_mean(-1e-9);
  g->set_grad_has_nan(true);
  g->set_grad_in_has_nan(true);
  g->set_mem_reserved_delta(-1);
  b.mutable_nan_origin()->set_layer("blocks.0.fc");
  b.mutable_nan_origin()->set_step(12);
  b.mutable_nan_origin()->set_op("log_1_7");
  b.mutable_nan_origin()->set_op_func("log");
  b.mutable_nan_origin()->set_op_module("blocks.0");
  b.set_op_graph_json(R"({"format": "tracetorch.ops"})");
  b.set_first_event(1234);
  return b;
}

TEST(FrameDecoder, DecodesWhatTheGeneratedCodeEncodes) {
  const std::string bytes = Rich().SerializeAsString();
  EXPECT_EQ(DecoderDisagreement(bytes), "");
  absl::StatusOr<EventBatchSummary> s = DecodeEventBatch(bytes, nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sequence, 41u);
  EXPECT_EQ(s->dropped_events, 7u);
  EXPECT_EQ(s->forward_events, 3u);
  EXPECT_EQ(s->backward_events, 1u);
  ASSERT_TRUE(s->nan_origin.has_value());
  EXPECT_EQ(s->nan_origin->layer, "blocks.0.fc");
  EXPECT_FALSE(s->nan_origin->is_nan);
  EXPECT_EQ(s->nan_origin->op, "log_1_7");
  EXPECT_EQ(s->nan_origin->op_func, "log");
  EXPECT_EQ(s->nan_origin->op_module, "blocks.0");
  EXPECT_EQ(s->op_graph_json, R"({"format": "tracetorch.ops"})");
  absl::StatusOr<EventBatchSummary> skimmed = SkimEventBatch(bytes);
  ASSERT_TRUE(skimmed.ok()) << skimmed.status();
  EXPECT_EQ(skimmed->op_graph_json, s->op_graph_json);
  EXPECT_EQ(s->first_event, 1234u);
  EXPECT_EQ(skimmed->first_event, 1234u);
}

TEST(FrameDecoder, DecodesTheAgentsEncoder) {
  std::vector<ForwardEvent> fwd(2);
  fwd[0].layer_id = 5;
  fwd[0].step = 3;
  fwd[0].latency_ms = 1.5;
  WireTensor t;
  t.shape = {2, 3};
  t.stats = TensorStats{0.0, 1.0, -1.0, 1.0, 0, 2};
  fwd[0].outputs.push_back(t);
  fwd[1].layer_id = 6;
  std::vector<BackwardEvent> bwd(1);
  bwd[0].layer_id = 5;
  bwd[0].sample.grad_norm = 0.5;
  NanOrigin origin{"x", 2, true};
  std::string frame;
  AppendEventBatchFrame({.sequence = 9, .dropped_events = 1, .nan_origin = &origin}, fwd, bwd,
                        1 << 20, &frame);
  v1::AgentMessage m;
  ASSERT_TRUE(m.ParseFromArray(frame.data() + 4, static_cast<int>(frame.size() - 4)));
  const std::string batch = m.events().SerializeAsString();
  EXPECT_EQ(DecoderDisagreement(batch), "");
  std::vector<TensorInfo> inputs, outputs;
  testing::oracle_internal::Collect c;
  ASSERT_TRUE(DecodeEventBatch(batch, &c).ok());
  ASSERT_EQ(c.forward.size(), 2u);
  EXPECT_TRUE(c.forward[0].outputs_have_inf);
  EXPECT_EQ(c.forward[0].first_output_std, 1.0);
  DecodeForwardTensors(c.forward[0].bytes, &inputs, &outputs);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(outputs[0].dtype, "torch.float32");
  EXPECT_EQ(outputs[0].device, "cpu");
}

TEST(FrameDecoder, CarriesTheMaskFactsAndABackwardOrigin) {
  // Layer 1 outputs a causal mask (0 / -inf); layer 2 a mask and masked scores; layer 3 an
  // Inf from an agent that sends no mask facts (an older one): outside a mask.
  std::vector<ForwardEvent> fwd(3);
  WireTensor mask;
  mask.shape = {4, 4};
  mask.stats.emplace();
  mask.stats->inf_count = 6;
  mask.stats->neg_inf_count = 6;
  mask.stats->finite_all_zero = true;
  WireTensor scores = mask;
  scores.stats->finite_all_zero = false;
  WireTensor old_agent;
  old_agent.stats.emplace();
  old_agent.stats->inf_count = 6;
  fwd[0].layer_id = 1;
  fwd[0].outputs.push_back(mask);
  fwd[1].layer_id = 2;
  fwd[1].outputs = {mask, scores};
  fwd[2].layer_id = 3;
  fwd[2].outputs.push_back(old_agent);
  NanOrigin origin{"blocks.0.mlp", 4, true};
  origin.backward = true;
  std::string frame;
  AppendEventBatchFrame({.sequence = 1, .nan_origin = &origin}, fwd, {}, 1 << 20, &frame);
  v1::AgentMessage m;
  ASSERT_TRUE(m.ParseFromArray(frame.data() + 4, static_cast<int>(frame.size() - 4)));
  const v1::TensorStats& parsed = m.events().forward(0).outputs(0).stats();
  EXPECT_EQ(parsed.neg_inf_count(), 6);
  EXPECT_TRUE(parsed.finite_all_zero());
  EXPECT_TRUE(m.events().nan_origin().backward());
  const std::string batch = m.events().SerializeAsString();
  EXPECT_EQ(DecoderDisagreement(batch), "");
  testing::oracle_internal::Collect c;
  absl::StatusOr<EventBatchSummary> s = DecodeEventBatch(batch, &c);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->nan_origin.has_value());
  EXPECT_EQ(*s->nan_origin, origin);
  ASSERT_EQ(c.forward.size(), 3u);
  EXPECT_TRUE(c.forward[0].outputs_have_inf && c.forward[0].outputs_inf_in_masks_only);
  EXPECT_TRUE(c.forward[1].outputs_have_inf && !c.forward[1].outputs_inf_in_masks_only);
  EXPECT_TRUE(c.forward[2].outputs_have_inf && !c.forward[2].outputs_inf_in_masks_only);
  std::vector<TensorInfo> inputs, outputs;
  DecodeForwardTensors(c.forward[1].bytes, &inputs, &outputs);
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].stats->neg_inf_count, 6);
  EXPECT_TRUE(outputs[0].stats->finite_all_zero);
  EXPECT_FALSE(outputs[1].stats->finite_all_zero);

  // Decoding into vectors that hold another event's tensors replaces them exactly (their storage
  // is reused): as if decoded into fresh vectors.
  for (size_t k : {size_t{0}, size_t{2}, size_t{1}}) {
    std::vector<TensorInfo> fresh_in, fresh_out;
    DecodeForwardTensors(c.forward[k].bytes, &fresh_in, &fresh_out);
    DecodeForwardTensors(c.forward[k].bytes, &inputs, &outputs);
    EXPECT_EQ(inputs, fresh_in) << k;
    EXPECT_EQ(outputs, fresh_out) << k;
  }
}

// Hand-made byte strings at the edges of the wire format: each must be accepted or refused as
// libprotobuf does, with the same values.
TEST(FrameDecoder, AgreesWithTheGeneratedParserAtTheEdges) {
  const std::string rich = Rich().SerializeAsString();
  const std::vector<std::string> cases = {
      "",
      std::string("\x08\x01\x08\x02", 4),                  // A scalar twice: the last wins.
      std::string("\x12\x04\x22\x02\x08\x05", 6),          // Unpacked shape in an input.
      std::string("\x12\x06\x22\x04\x0a\x02\x01\x02", 8),  // Packed shape.
      std::string("\x12\x08\x2a\x02\x22\x00\x2a\x02\x22\x00", 10),  // Empty stats twice: merged.
      std::string("\x12\x0e\x2a\x0c\x22\x0a\x11\x00\x00\x00\x00\x00\x00\xf0\x3f\x28", 16),
      std::string("\x12\x02\x08\x01\x12\x02\x08\x02", 8),  // Two forwards.
      std::string("\x0d\x01\x02\x03\x04", 5),              // Known field, wrong wire type.
      std::string("\x08\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11),  // 11-byte varint.
      std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10),      // 10 bytes, high bits.
      std::string("\x00", 1),                                           // Tag 0.
      std::string("\x0c", 1),                                           // End group alone.
      std::string("\x0b\x08\x01\x0c", 4),                               // A group, closed.
      std::string("\x0b\x08\x01\x14", 4),                               // Closed by another.
      std::string("\x0b\x08\x01", 3),                                   // Never closed.
      std::string("\x0e\x00", 2),                                       // Wire type 6.
      std::string("\x12\x80\x80\x80\x80\x00", 6),                       // A 5-byte length of 0.
      std::string("\x12\x80\x80\x80\x80\x80\x00", 7),                   // A 6-byte length.
      std::string("\xf8\xff\xff\xff\x1f\x00", 6),          // A 5-byte tag whose high bits drop.
      std::string("\x2a\x03\x0a\x01\xff", 5),              // nan_origin.layer not UTF-8.
      std::string("\x2a\x04\x0a\x02\xc3\xa9", 6),          // ...and valid UTF-8.
      std::string("\x2a\x05\x0a\x03\xed\xa0\x80", 7),      // A surrogate.
      std::string("\x2a\x02\x18\x01\x2a\x02\x10\x05", 8),  // nan_origin twice: merged.
      std::string("\x12\x03\x08\x01", 4),                  // Truncated nested message.
      std::string("\x1a\x02\x30\x02", 4),                  // bool 2 is true.
      std::string("\x12\x05\x22\x03\x18\xff\x01", 7),      // device zigzag.
      rich.substr(0, rich.size() - 1),
      rich + rich,  // Concatenated messages merge.
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(DecoderDisagreement(cases[i]), "") << "case " << i;
  }
  // Nesting: groups 99 deep inside the batch are accepted, 101 deep refused, as by libprotobuf.
  for (int depth : {99, 100, 101, 102}) {
    std::string nested;
    for (int i = 0; i < depth; ++i) nested += '\x0b';  // Field 1, start group.
    for (int i = 0; i < depth; ++i) nested += '\x0c';
    EXPECT_EQ(DecoderDisagreement(nested), "") << "depth " << depth;
  }
}

// A deterministic mutation loop over encoded batches (the libFuzzer target does the same without
// bounds): flips, truncations and insertions must never make the two parsers disagree.
TEST(FrameDecoder, AgreesWithTheGeneratedParserOnMutatedBatches) {
  std::mt19937 rng(1234);
  const std::string seed = Rich().SerializeAsString();
  for (int round = 0; round < 50000; ++round) {
    std::string bytes = seed;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 4) {
        case 0:
          bytes[at] = static_cast<char>(rng());
          break;
        case 1:
          bytes.resize(at);
          break;
        case 2:
          bytes.insert(at, 1, static_cast<char>(rng()));
          break;
        default:
          bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
          break;
      }
    }
    const std::string d = DecoderDisagreement(bytes);
    ASSERT_EQ(d, "") << "round " << round << " bytes " << absl::BytesToHexString(bytes);
  }
}

}  // namespace
}  // namespace tracetorch::protocol::wire
