#include "client/batch_frames.h"

#include <algorithm>

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
  absl::Span<const protocol::ForwardEvent> fwd = taken.forward;
  absl::Span<const protocol::BackwardEvent> bwd = taken.backward;
  bool first = true;
  while (!fwd.empty() || !bwd.empty() || (first && origin != nullptr)) {
    wire::BatchFields fields;
    fields.sequence = ++*sequence;
    fields.dropped_events = taken.dropped_events;
    fields.nan_origin = first ? origin : nullptr;
    fields.first_event = *next_event;
    first = false;
    // Bound events per frame by max_batch_events as well as by bytes.
    const size_t f_take = std::min(fwd.size(), max_batch_events);
    const size_t b_take = std::min(bwd.size(), max_batch_events - f_take);
    const size_t begin = out->size();
    const wire::BatchResult r = wire::AppendEventBatchFrame(
        fields, fwd.first(f_take), bwd.first(b_take), max_frame_bytes, out);
    fwd.remove_prefix(r.forward_used);
    bwd.remove_prefix(r.backward_used);
    result.oversized += r.forward_oversized;
    const uint64_t events = r.forward_used - r.forward_oversized + r.backward_used;
    if (out->size() > begin) {
      frames->push_back({begin, out->size(), fields.sequence, *next_event, events});
      *next_event += events;
      ++result.batches;
    }
    if (r.forward_used == 0 && r.backward_used == 0) break;  // Cannot happen; never spin.
  }
  return result;
}

}  // namespace tracetorch::client
