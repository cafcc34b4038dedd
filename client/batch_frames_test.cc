#include "client/batch_frames.h"

#include <string_view>

#include "gtest/gtest.h"
#include "protocol/frame_decoder.h"
#include "protocol/wire.h"

namespace tracetorch::client {
namespace {

// The events as the queue encodes them.
std::string Encoded(const std::vector<protocol::ForwardEvent>& fwd,
                    const std::vector<protocol::BackwardEvent>& bwd) {
  std::string out;
  for (const protocol::ForwardEvent& e : fwd) protocol::wire::AppendForwardEventField(e, &out);
  for (const protocol::BackwardEvent& e : bwd) protocol::wire::AppendBackwardEventField(e, &out);
  return out;
}

// The EventBatch of a frame: past the header, the AgentMessage tag and its length.
protocol::wire::EventBatchSummary Summary(const std::string& out, const BatchFrame& f) {
  std::string_view frame = std::string_view(out).substr(f.begin, f.end - f.begin);
  EXPECT_EQ(protocol::wire::GetFrameHeader(frame.data()), frame.size() - 4);
  frame.remove_prefix(5);                                                // Header, tag of field 3.
  while (static_cast<uint8_t>(frame[0]) & 0x80) frame.remove_prefix(1);  // Length varint.
  frame.remove_prefix(1);
  absl::StatusOr<protocol::wire::EventBatchSummary> s = protocol::wire::SkimEventBatch(frame);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : protocol::wire::EventBatchSummary{};
}

TEST(AppendBatchFrames, StampsSequencesAndStreamPositions) {
  std::vector<protocol::ForwardEvent> fwd(5);
  std::vector<protocol::BackwardEvent> bwd(2);
  NanOrigin origin;
  origin.layer = "net.fc";
  const std::string graph = R"({"format": "tracetorch.ops"})";
  uint64_t sequence = 10;
  uint64_t next = 100;
  std::string out = "layer table";  // Frames go after what is there.
  std::vector<BatchFrame> frames;
  const std::string events = Encoded(fwd, bwd);
  BatchFramesResult r = AppendBatchFrames({events, 7, &origin, &graph, 3}, /*max_batch_events=*/3,
                                          1 << 20, &sequence, &next, &out, &frames);
  EXPECT_EQ(r.oversized, 0u);
  EXPECT_EQ(r.batches, 3u);
  ASSERT_EQ(frames.size(), 4u);  // The graph, then 3 + 3 + 1 events.
  EXPECT_EQ(frames[0].begin, 11u);
  const uint64_t want_first[] = {100, 100, 103, 106};
  const uint64_t want_events[] = {0, 3, 3, 1};
  for (size_t i = 0; i < frames.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(frames[i].sequence, 11 + i);
    EXPECT_EQ(frames[i].first_event, want_first[i]);
    EXPECT_EQ(frames[i].events, want_events[i]);
    if (i > 0) {
      EXPECT_EQ(frames[i].begin, frames[i - 1].end);
    }
    const protocol::wire::EventBatchSummary s = Summary(out, frames[i]);
    EXPECT_EQ(s.sequence, frames[i].sequence);
    EXPECT_EQ(s.first_event, frames[i].first_event);
    EXPECT_EQ(s.forward_events + s.backward_events, frames[i].events);
    EXPECT_EQ(s.dropped_events, 3u);
    EXPECT_EQ(s.nan_origin.has_value(), i == 0) << "the origin goes with its graph, once";
    EXPECT_EQ(s.op_graph_json.empty(), i != 0);
  }
  EXPECT_EQ(frames.back().end, out.size());
  EXPECT_EQ(next, 107u);
  EXPECT_EQ(sequence, 14u);
}

TEST(AppendBatchFrames, AnOriginWithoutAFittingGraphGoesWithTheFirstEvents) {
  std::vector<protocol::ForwardEvent> fwd(2);
  NanOrigin origin;
  origin.layer = "net.fc";
  const std::string graph(4096, 'x');  // Larger than the frame limit below.
  uint64_t sequence = 0;
  uint64_t next = 0;
  std::string out;
  std::vector<BatchFrame> frames;
  const std::string events = Encoded(fwd, {});
  AppendBatchFrames({events, 2, &origin, &graph, 0}, 8, 1024, &sequence, &next, &out, &frames);
  ASSERT_EQ(frames.size(), 1u);
  const protocol::wire::EventBatchSummary s = Summary(out, frames[0]);
  EXPECT_TRUE(s.nan_origin.has_value());
  EXPECT_TRUE(s.op_graph_json.empty());
  EXPECT_EQ(s.forward_events, 2u);
}

// The queue refuses events that fit in no frame; one that gets here anyway ends the framing and
// is counted, without a stream position.
TEST(AppendBatchFrames, AnEventTooLargeForAFrameIsCountedNotPositioned) {
  std::vector<protocol::ForwardEvent> fwd(3);
  fwd[2].inputs.resize(1);
  fwd[2].inputs[0].shape.assign(400, 1 << 20);  // Alone over 1024 bytes.
  uint64_t sequence = 0;
  uint64_t next = 7;
  std::string out;
  std::vector<BatchFrame> frames;
  const std::string events = Encoded(fwd, {});
  BatchFramesResult r =
      AppendBatchFrames({events, 3, nullptr, nullptr, 0}, 8, 1024, &sequence, &next, &out, &frames);
  EXPECT_EQ(r.oversized, 1u);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].events, 2u);
  EXPECT_EQ(next, 9u);
}

// Frames end at kBatchFrameBytes (tracetorchd's read buffer holds them whole), whatever
// max_batch_events and max_frame_bytes allow; no event is lost between them.
TEST(AppendBatchFrames, FramesEndAtTheDaemonsBufferSize) {
  std::vector<protocol::BackwardEvent> bwd(6000);
  for (size_t i = 0; i < bwd.size(); ++i) {
    bwd[i].layer_id = static_cast<uint32_t>(i % 50);
    bwd[i].step = i;
    bwd[i].sample.grad_norm = 1.0;
    bwd[i].sample.grad_mean = 2.0;
  }
  const std::string events = Encoded({}, bwd);
  ASSERT_GT(events.size(), 2 * protocol::wire::kBatchFrameBytes);
  uint64_t sequence = 0;
  uint64_t next = 0;
  std::string out;
  std::vector<BatchFrame> frames;
  BatchFramesResult r = AppendBatchFrames({events, bwd.size(), nullptr, nullptr, 0}, 1 << 20,
                                          16 << 20, &sequence, &next, &out, &frames);
  EXPECT_EQ(r.oversized, 0u);
  EXPECT_GE(frames.size(), 3u);
  uint64_t total = 0;
  for (const BatchFrame& f : frames) {
    EXPECT_LE(f.end - f.begin,
              protocol::wire::kFrameHeaderBytes + protocol::wire::kBatchFrameBytes);
    total += Summary(out, f).backward_events;
  }
  EXPECT_EQ(total, bwd.size());
  EXPECT_EQ(next, bwd.size());
}

}  // namespace
}  // namespace tracetorch::client
