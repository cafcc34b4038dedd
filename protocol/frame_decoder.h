// The daemon's decoder of the agent's hot message, tracetorch.v1.EventBatch, straight from its wire
// bytes: no generated code, no allocation per event, memory independent of the batch's size (a
// parsed message would take several times the frame, and a hostile frame of tiny nested messages
// tens of times). It accepts exactly what libprotobuf's ParseFromArray accepts and decodes the same
// values (frame_decoder_test.cc and fuzz/frame_fuzz.cc compare the two): unknown fields and known
// fields of another wire type are skipped, packed and unpacked repeated scalars both read, a later
// scalar replaces an earlier one, a repeated sub-message appends, a singular one merges.
//
// Events are visited in wire order. Tensors are not decoded with the event (the daemon keeps only
// each layer's latest call's tensors): DecodeForwardTensors() reads them from the event's bytes.
//
// Example (the daemon's order: the batch's own fields first, then one pass over the events):
//   absl::StatusOr<EventBatchSummary> head = SkimEventBatch(bytes);  // Cheap: events not decoded.
//   if (!head.ok()) return head.status();
//   if (absl::Status s = DecodeEventBatch(bytes, &visitor).status(); !s.ok()) ...;
//
// Thread-compatible: pure functions.
#ifndef TRACETORCH_PROTOCOL_FRAME_DECODER_H_
#define TRACETORCH_PROTOCOL_FRAME_DECODER_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "protocol/events.h"
#include "trace/record.h"

namespace tracetorch::protocol::wire {

// A ForwardEvent without its tensors.
struct ForwardFields {
  uint32_t layer_id = 0;
  uint64_t step = 0;
  std::optional<double> latency_ms;
  std::optional<int64_t> mem_alloc_delta;
  std::optional<int64_t> mem_reserved_delta;
  int inputs = 0;
  int outputs = 0;
  bool outputs_have_nan = false;  // Some output's stats.nan_count > 0.
  bool outputs_have_inf = false;  // Some output's stats.inf_count > 0.
  // With outputs_have_inf: every output holding an Inf is a mask (trace/nonfinite.h).
  bool outputs_inf_in_masks_only = false;
  std::optional<double> first_output_std;  // outputs[0].stats.std, when set.
  std::string_view bytes;                  // The event's bytes, for DecodeForwardTensors.
};

class EventBatchVisitor {
 public:
  virtual ~EventBatchVisitor() = default;
  virtual void OnForward(const ForwardFields& event) = 0;
  virtual void OnBackward(const BackwardEvent& event) = 0;
};

struct EventBatchSummary {
  uint64_t sequence = 0;
  uint64_t dropped_events = 0;
  std::optional<NanOrigin> nan_origin;
  // The op graph document (field 6), a view into the batch's bytes; empty when absent.
  std::string_view op_graph_json;
  std::optional<uint64_t> first_event;  // Field 7: the first event's stream position.
  uint64_t forward_events = 0;
  uint64_t backward_events = 0;
};

// Decodes `batch` (an EventBatch's bytes: no frame header, no AgentMessage tag), visiting every
// event when `visitor` is not null. InvalidArgument when ParseFromArray would refuse the bytes; the
// visitor has then seen the events before the first malformed byte (check first, with a null
// visitor, where that matters: a batch that passed the check decodes without error).
absl::StatusOr<EventBatchSummary> DecodeEventBatch(std::string_view batch,
                                                   EventBatchVisitor* visitor);

// The batch's own fields (sequence, dropped_events, nan_origin, op_graph_json, first_event) and how
// many events it holds, reading only the batch's top level: the events' own bytes are neither
// decoded nor checked. InvalidArgument when that level is malformed (DecodeEventBatch would refuse
// it too).
absl::StatusOr<EventBatchSummary> SkimEventBatch(std::string_view batch);

// Replaces `inputs` and `outputs` with the tensors of a forward event (ForwardFields::bytes of a
// decoded batch): shape, dtype and device names (protocol/codes.h), stats when present. Elements
// already in the vectors are overwritten in place, so a keeper that decodes into the same vectors
// call after call allocates only when a tensor outgrows what was there.
void DecodeForwardTensors(std::string_view forward, std::vector<TensorInfo>* inputs,
                          std::vector<TensorInfo>* outputs);

// When `payload` (an AgentMessage's bytes, no frame header) is exactly AgentMessage{events: ...}
// (field 3, length-delimited, nothing else: what the client library sends), returns the EventBatch
// bytes within it, a view into `payload`, for DecodeEventBatch; nullopt for anything else (another
// kind, extra fields, a malformed length), which the caller parses as a whole message
// (protocol/agent_proto.h).
std::optional<std::string_view> EventBatchOfMessage(std::string_view payload);

}  // namespace tracetorch::protocol::wire

#endif  // TRACETORCH_PROTOCOL_FRAME_DECODER_H_
