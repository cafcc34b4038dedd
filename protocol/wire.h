// The ingest protocol's framing and a hand-written protobuf encoder for the agent's messages.
//
// Frames (see agent.proto, "Transport (ingest)"): a u32 little-endian payload length, then the
// payload, a serialized tracetorch.v1.AgentMessage or DaemonMessage. The encoder below writes the
// exact protobuf wire format of agent.proto (tests parse its output with the generated code), so
// the client library needs neither libprotobuf nor gRPC at run time and encoding a batch does not
// allocate once the output buffer has grown.
//
// Internal to the client library (and its tests). Thread-compatible: no shared state.
#ifndef TRACETORCH_PROTOCOL_WIRE_H_
#define TRACETORCH_PROTOCOL_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "protocol/events.h"
#include "trace/record.h"

namespace tracetorch::protocol::wire {

inline constexpr size_t kFrameHeaderBytes = 4;
inline constexpr uint32_t kDefaultMaxFrameBytes = 16u << 20;
inline constexpr int32_t kProtocolVersion = 1;  // tracetorch.v1.PROTOCOL_VERSION_1

inline void PutFrameHeader(uint32_t length, char* out) {
  out[0] = static_cast<char>(length & 0xff);
  out[1] = static_cast<char>((length >> 8) & 0xff);
  out[2] = static_cast<char>((length >> 16) & 0xff);
  out[3] = static_cast<char>((length >> 24) & 0xff);
}

inline uint32_t GetFrameHeader(const char* in) {
  const auto* p = reinterpret_cast<const unsigned char*>(in);
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// The client library cuts its event batches into frames of at most this many payload bytes (an
// event larger than that goes in a frame of its own, up to the frame limit): tracetorchd reads each
// connection into a 64 KiB buffer (daemon/ingest/frame_buffer.h) that holds such a frame whole,
// where a larger frame makes it allocate, copy and free a buffer the frame's size every time.
inline constexpr size_t kBatchFrameBytes = 60u << 10;

struct HelloFields {
  const ProcessIdentity* identity = nullptr;  // Required.
  std::string_view resume_session_id;
  uint64_t dropped_events = 0;
  uint64_t sent_events = 0;
  // Hello.replay_first_event (field 6): set by an agent that re-sends what is not yet durable.
  std::optional<uint64_t> replay_first_event = {};
  int32_t protocol_version = kProtocolVersion;
  // Hello.flight_recorder (field 7): set by an agent that attaches its flight recorder's memfd to
  // the frame (SCM_RIGHTS). 0: no recorder.
  uint32_t flight_layout_version = 0;
  uint64_t flight_region_bytes = 0;
};

// Each Append*Frame appends one complete frame (header and AgentMessage) to `*out`.
void AppendHelloFrame(const HelloFields& hello, std::string* out);
void AppendLayerTableFrame(absl::Span<const LayerDecl> layers, std::string* out);
void AppendHeartbeatFrame(int64_t unix_ns, uint64_t dropped_events, std::string* out);
void AppendEndFrame(std::optional<double> total_time_ms, uint64_t dropped_events,
                    uint64_t hook_errors, std::string* out);

struct BatchFields {
  uint64_t sequence = 0;
  uint64_t dropped_events = 0;
  const NanOrigin* nan_origin = nullptr;  // Optional.
  std::string_view op_graph_json = {};    // Optional (field 6, bytes); must fit in one frame.
  // Optional (field 7): the stream position of the batch's first event.
  std::optional<uint64_t> first_event = {};
};

struct BatchResult {
  size_t forward_used = 0;       // A prefix of `forward` went into the frame...
  size_t backward_used = 0;      // ...and a prefix of `backward`.
  size_t forward_oversized = 0;  // Leading events skipped because one alone exceeds the limit.
};

// Appends one EventBatch frame holding as many leading events of `forward`, then `backward`, as fit
// in `max_frame_bytes` (payload bytes). A single event larger than the limit is skipped and counted
// in forward_oversized (backward events are small and fixed-size). Appends nothing when no event
// fits or both spans are empty and there is neither a nan_origin nor an op_graph_json.
BatchResult AppendEventBatchFrame(const BatchFields& batch, absl::Span<const ForwardEvent> forward,
                                  absl::Span<const BackwardEvent> backward,
                                  uint32_t max_frame_bytes, std::string* out);

// ---- Events encoded one at a time (the client library's queue) ----
//
// Each event encoded as it is produced, into a buffer that AppendEncodedEventBatchFrame later wraps
// in a frame: the event's field of the EventBatch (2: ForwardEvent, 3: BackwardEvent; tag, length,
// body), byte for byte what AppendEventBatchFrame writes for the same event. Forward and backward
// events may interleave: a parser keeps each repeated field's order, and the daemon's decoder
// (frame_decoder.h) visits the events in wire order.
//
// Example:
//   std::string queue;
//   AppendForwardEventField(forward, &queue);
//   AppendBackwardEventField(backward, &queue);
//   if (EncodedEventBatchPayloadBytes(fields, queue.size()) <= max_frame_bytes) {
//     AppendEncodedEventBatchFrame(fields, queue, &out);
//   }

// The most payload bytes a frame holding one event field adds to it, when the batch carries no
// nan_origin or op_graph_json: the AgentMessage wrapper, sequence, dropped_events, first_event. An
// event whose field is longer than max_frame_bytes less this fits in no frame.
inline constexpr size_t kMaxEncodedBatchOverheadBytes = 1 + 5 + 11 + 11 + 11;

// Append the event's field to `*out`; return the number of bytes appended.
size_t AppendForwardEventField(const ForwardEvent& event, std::string* out);
size_t AppendBackwardEventField(const BackwardEvent& event, std::string* out);

// The length of the event field at the front of `events` (as appended above, header and body);
// 0 when `events` does not start with a whole length-delimited field.
size_t EventFieldLength(std::string_view events);

// The payload bytes (without the frame header) of the frame AppendEncodedEventBatchFrame appends
// for `batch` around `event_bytes` bytes of event fields: what to compare with max_frame_bytes.
size_t EncodedEventBatchPayloadBytes(const BatchFields& batch, size_t event_bytes);

// Appends one EventBatch frame: `batch`'s fields and `events` (whole event fields, as appended
// above), copied as they are. Requires: the caller checked the size
// (EncodedEventBatchPayloadBytes) against its frame limit.
void AppendEncodedEventBatchFrame(const BatchFields& batch, std::string_view events,
                                  std::string* out);

// A decoded DaemonMessage.
struct DaemonReply {
  enum class Kind { kUnknown, kWelcome, kError, kDurable };
  Kind kind = Kind::kUnknown;
  std::string session_id;  // Welcome
  bool resumed = false;    // Welcome
  // Welcome (durable_sequence: absent from an older daemon) and Durable (sequence, events).
  std::optional<uint64_t> durable_sequence;
  uint64_t durable_events = 0;
  std::string message;  // IngestError
  int32_t code = 0;     // IngestError: an absl::StatusCode value.
  bool fatal = false;   // IngestError
};

// Parses a DaemonMessage payload (without the frame header). InvalidArgument when it is not valid
// protobuf wire format; unknown fields are skipped.
absl::StatusOr<DaemonReply> ParseDaemonReply(std::string_view payload);

}  // namespace tracetorch::protocol::wire

#endif  // TRACETORCH_PROTOCOL_WIRE_H_
