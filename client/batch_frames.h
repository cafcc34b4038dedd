// The sender's encoding of what it took from the queue into EventBatch frames (protocol/wire.h),
// each stamped with its batch sequence and the stream position of its first event
// (agent.proto, "Durability and re-send"), so that the replay buffer can keep and re-send each
// frame as it is.
//
// Internal to the client library. Thread-compatible: a pure function of its arguments.
#ifndef TRACETORCH_CLIENT_BATCH_FRAMES_H_
#define TRACETORCH_CLIENT_BATCH_FRAMES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trace/record.h"

namespace tracetorch::client {

struct TakenEvents {
  // The events as the queue encoded them (protocol/wire.h Append*EventField), in order.
  std::string_view events;
  uint64_t count = 0;                          // How many events `events` holds.
  const NanOrigin* nan_origin = nullptr;       // Optional.
  const std::string* op_graph_json = nullptr;  // Optional.
  uint64_t dropped_events = 0;                 // The agent's count so far, in every batch.
};

// One EventBatch frame appended to the output.
struct BatchFrame {
  size_t begin = 0;  // Where the frame starts and ends in the output.
  size_t end = 0;
  uint64_t sequence = 0;
  uint64_t first_event = 0;
  uint64_t events = 0;
};

struct BatchFramesResult {
  uint64_t oversized = 0;  // Events left unframed: none fits (the queue refuses such events).
  uint64_t batches = 0;    // Frames of events (and of an origin without its graph).
};

// Appends to `*out` the frames of `taken`: the op graph first, in a batch of its own with the NaN
// origin it explains (a graph that cannot fit in one frame is not sent, and the origin then goes
// with the first events), then the events, at most `max_batch_events` and protocol::wire::
// kBatchFrameBytes per frame (an event larger than that alone, up to `max_frame_bytes`: tracetorchd
// reads such frames without growing its buffer). Each frame takes the
// next `*sequence` and starts at stream position `*next_event`, which advances by the events
// framed; `*frames` gets one entry per frame, in order.
BatchFramesResult AppendBatchFrames(const TakenEvents& taken, size_t max_batch_events,
                                    uint32_t max_frame_bytes, uint64_t* sequence,
                                    uint64_t* next_event, std::string* out,
                                    std::vector<BatchFrame>* frames);

}  // namespace tracetorch::client

#endif  // TRACETORCH_CLIENT_BATCH_FRAMES_H_
