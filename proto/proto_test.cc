// Checks the properties of the wire contract that peers rely on: messages round-trip, per-event
// encodings stay compact, and an unknown field from a newer peer is skipped, not fatal.
#include <gtest/gtest.h>

#include <string>

#include "tracetorch/v1/agent.pb.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::v1 {
namespace {

ForwardEvent TypicalForward() {
  ForwardEvent e;
  e.set_layer_id(42);
  e.set_step(1234);
  e.set_latency_ms(0.035);
  TensorEvent* out = e.add_outputs();
  out->add_shape(16);
  out->add_shape(64);
  out->set_dtype(6);    // c10::ScalarType::Float
  out->set_device(-1);  // cpu
  TensorStats* s = out->mutable_stats();
  s->set_mean(0.01);
  s->set_std(0.5);
  s->set_min(-1.6);
  s->set_max(1.8);
  return e;
}

TEST(WireContract, ForwardEventRoundTrips) {
  ForwardEvent e = TypicalForward();
  std::string bytes;
  ASSERT_TRUE(e.SerializeToString(&bytes));
  ForwardEvent back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  EXPECT_EQ(back.layer_id(), 42u);
  EXPECT_EQ(back.step(), 1234u);
  EXPECT_DOUBLE_EQ(back.latency_ms(), 0.035);
  ASSERT_EQ(back.outputs_size(), 1);
  EXPECT_EQ(back.outputs(0).device(), -1);
  EXPECT_TRUE(back.outputs(0).has_stats());
  EXPECT_FALSE(back.has_mem_alloc_delta());  // Unknown stays unknown, not 0.
}

TEST(WireContract, ForwardEventIsCompact) {
  // One output with full statistics: ids and codes are varints, no strings on the wire.
  EXPECT_LE(TypicalForward().ByteSizeLong(), 64u);
  ForwardEvent bare;
  bare.set_layer_id(3);
  bare.set_step(7);
  bare.set_latency_ms(0.1);
  EXPECT_LE(bare.ByteSizeLong(), 16u);
}

TEST(WireContract, UnknownFieldsFromNewerPeerAreSkipped) {
  // A newer agent adds field 99 to a BackwardEvent; an older daemon must still read the rest.
  BackwardEvent e;
  e.set_layer_id(5);
  e.set_grad_norm(1.5);
  std::string bytes;
  ASSERT_TRUE(e.SerializeToString(&bytes));
  const uint32_t tag = (99u << 3) | 0u;  // Field 99, wire type varint: a two-byte tag.
  bytes.push_back(static_cast<char>((tag & 0x7f) | 0x80));
  bytes.push_back(static_cast<char>(tag >> 7));
  bytes.push_back(static_cast<char>(0x01));
  BackwardEvent back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  EXPECT_EQ(back.layer_id(), 5u);
  EXPECT_DOUBLE_EQ(back.grad_norm(), 1.5);
}

TEST(WireContract, HelloCarriesVersionAndIdentity) {
  AgentMessage m;
  Hello* h = m.mutable_hello();
  h->set_protocol_version(PROTOCOL_VERSION_1);
  h->mutable_identity()->set_pid(1234);
  h->mutable_identity()->set_rank(3);
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  AgentMessage back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  ASSERT_EQ(back.kind_case(), AgentMessage::kHello);
  EXPECT_EQ(back.hello().protocol_version(), PROTOCOL_VERSION_1);
  EXPECT_TRUE(back.hello().identity().has_rank());
  EXPECT_FALSE(back.hello().identity().has_world_size());
}

TEST(WireContract, WatchRequestTargetsSessionOrJob) {
  WatchRequest r;
  r.mutable_session()->set_session_id("latest");
  EXPECT_EQ(r.target_case(), WatchRequest::kSession);
  r.set_job_id("job-7");
  EXPECT_EQ(r.target_case(), WatchRequest::kJobId);
}

}  // namespace
}  // namespace tracetorch::v1
