// Plain structs the client library sends to tracetorchd: who the process is, which layers it has,
// and compact per-call events. No protobuf or gRPC types: the agent includes this without them.
//
// Value types, not synchronised. Copy or move freely.
#ifndef TRACETORCH_PROTOCOL_EVENTS_H_
#define TRACETORCH_PROTOCOL_EVENTS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/inlined_vector.h"
#include "trace/aggregator.h"
#include "trace/record.h"

namespace tracetorch::protocol {

// Who the traced process is. CurrentProcessIdentity() fills the process fields; the agent adds the
// model and framework fields.
struct ProcessIdentity {
  int32_t pid = 0;
  std::string host;
  int64_t start_time_unix_ns = 0;
  std::optional<int32_t> rank;        // RANK
  std::optional<int32_t> local_rank;  // LOCAL_RANK
  std::optional<int32_t> world_size;  // WORLD_SIZE
  std::string job_id;                 // TRACETORCH_JOB, else TORCHELASTIC_RUN_ID
  std::string model_name;
  std::string torch_version;
  std::string python_version;  // Empty for a libtorch (C++) program.
  std::string platform;
  bool cuda_available = false;
  std::string cuda_version;
  std::string active_device;
};

// The identity of the calling process: pid, host name, process start time (from /proc, else now),
// rank/local rank/world size from RANK/LOCAL_RANK/WORLD_SIZE (unset when absent or not an integer),
// job id from TRACETORCH_JOB, else TORCHELASTIC_RUN_ID. Model and framework fields are left empty.
ProcessIdentity CurrentProcessIdentity();

// CurrentProcessIdentity() with the model and framework fields (model name, torch and Python
// versions, platform, CUDA, active device) taken from a trace's metadata: what an agent declares.
ProcessIdentity IdentityFor(const TraceMetadata& metadata);

// A layer declared to the daemon. `id` is the agent's dense layer id (TraceAggregator::LayerId
// works) and must be unique within the session; events refer to it.
struct LayerDecl {
  uint32_t id = 0;
  LayerInfo info;
};

// A tensor as the wire carries it: dtype and device as codes (protocol/codes.h).
struct WireTensor {
  absl::InlinedVector<int64_t, 4> shape;
  int32_t dtype = 6;    // torch.float32
  int32_t device = -1;  // cpu
  std::optional<TensorStats> stats;
};

// One forward call of a layer. Inline storage for the common one-input/one-output layer, so
// building and queueing one does not allocate.
struct ForwardEvent {
  uint32_t layer_id = 0;
  uint64_t step = 0;
  std::optional<double> latency_ms;
  absl::InlinedVector<WireTensor, 1> inputs;
  absl::InlinedVector<WireTensor, 1> outputs;
  std::optional<int64_t> mem_alloc_delta;
  std::optional<int64_t> mem_reserved_delta;
};

// One backward pass through a layer.
struct BackwardEvent {
  uint32_t layer_id = 0;
  uint64_t step = 0;
  BackwardSample sample;
};

// ---- What the daemon receives besides events (agent.proto's Hello, Heartbeat, End) ----
//
// Decoded from the wire by protocol/agent_proto.h; the daemon's core takes these, never the
// generated messages.

// The first message of a connection: who the process is and, on a reconnect, where it stands.
struct Hello {
  int32_t protocol_version = 0;  // tracetorch.v1.ProtocolVersion; wire::kProtocolVersion is 1.
  ProcessIdentity identity;
  std::string resume_session_id;  // Empty: a new session.
  uint64_t dropped_events = 0;    // Total the agent dropped so far.
  uint64_t sent_events = 0;       // Total the agent wrote to earlier connections.
  // Set by an agent that re-sends what is not yet durable: the stream position it re-sends from.
  std::optional<uint64_t> replay_first_event;
  // Set by an agent that passes its flight recorder with the Hello (Hello.flight_recorder).
  bool flight_recorder = false;
  uint32_t flight_layout_version = 0;
  uint64_t flight_region_bytes = 0;
};

struct Heartbeat {
  int64_t unix_ns = 0;
  uint64_t dropped_events = 0;  // Total so far (monotonic).
};

// The agent's last message: the run ended.
struct End {
  std::optional<double> total_time_ms;
  uint64_t dropped_events = 0;  // Total so far (monotonic).
  uint64_t hook_errors = 0;
};

// Conversions from the core's types (trace/aggregator.h), for an agent that already builds them.
WireTensor ToWireTensor(const TensorInfo& tensor);
ForwardEvent ToForwardEvent(uint32_t layer_id, uint64_t step, const ForwardSample& sample);

}  // namespace tracetorch::protocol

#endif  // TRACETORCH_PROTOCOL_EVENTS_H_
