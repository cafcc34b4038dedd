#include "client/batch_frames.h"

#include <string_view>

#include "protocol/wire.h"

namespace tracetorch::client {

namespace wire = protocol::wire;

BatchFramesResult AppendBatchFrames(const TakenEvents& taken, size_t max_batch_events,
                                    uint32_t max_frame_bytes, uint64_t* sequence,
                                    uint64_t* next_event, std::string* out,
                                    std::vector<BatchFrame>* frames) {
  BatchFramesResult result;
  const NanOrigin* origin = taken.nan_origin;
  if (taken.op_graph_json != nullptr) {
    wire::BatchFields fields;
    fields.dropped_events = taken.dropped_events;
    fields.nan_origin = origin;
    fields.op_graph_json = *taken.op_graph_json;
    fields.first_event = *next_event;
    size_t need = taken.op_graph_json->size() + 64;  // Tags, lengths, sequence, counts.
    if (origin != nullptr) {
      need += origin->layer.size() + origin->op.size() + origin->op_func.size() +
              origin->op_module.size() + 32;
    }
    if (need <= max_frame_bytes) {
      fields.sequence = ++*sequence;
      const size_t begin = out->size();
      wire::AppendEventBatchFrame(fields, {}, {}, max_frame_bytes, out);
      frames->push_back({begin, out->size(), fields.sequence, *next_event, 0});
      origin = nullptr;  // Sent with its graph.
    }
  }
  std::string_view queued = taken.events;
  uint64_t framed = 0;
  bool first = true;
  while (!queued.empty() || (first && origin != nullptr)) {
    wire::BatchFields fields;
    fields.sequence = *sequence + 1;
    fields.dropped_events = taken.dropped_events;
    fields.nan_origin = first ? origin : nullptr;
    fields.first_event = *next_event;
    first = false;
    // The frame's own bytes, and 4 for its length varint growing to 5 bytes with the events.
    const size_t overhead = wire::EncodedEventBatchPayloadBytes(fields, 0) + 4;
    size_t bytes = 0;
    uint64_t n = 0;
    while (bytes < queued.size() && n < max_batch_events) {
      const size_t field = wire::EventFieldLength(queued.substr(bytes));
      if (field == 0 || overhead + bytes + field > max_frame_bytes ||
          (n > 0 && overhead + bytes + field > wire::kBatchFrameBytes)) {
        break;
      }
      bytes += field;
      ++n;
    }
    if (n == 0 && fields.nan_origin == nullptr) break;  // Fits in no frame: counted below.
    ++*sequence;
    const size_t begin = out->size();
    wire::AppendEncodedEventBatchFrame(fields, queued.substr(0, bytes), out);
    queued.remove_prefix(bytes);
    frames->push_back({begin, out->size(), fields.sequence, *next_event, n});
    *next_event += n;
    framed += n;
    ++result.batches;
  }
  result.oversized = taken.count - framed;
  return result;
}

}  // namespace tracetorch::client
