// The daemon's side of the ingest protocol (proto/tracetorch/v1/agent.proto) in plain types: an
// AgentMessage decoded into protocol/events.h's structs, a DaemonMessage encoded from a
// wire::DaemonReply, and field-for-field conversions between those structs and the generated
// messages. The daemon's core takes and gives only the plain types; every tracetorch.v1 message
// it receives or sends goes through here.
//
// The hot message, an EventBatch, is not converted: the core decodes it straight from its bytes
// (protocol/frame_decoder.h); an AgentMessage carrying one yields those bytes.
//
// Thread-compatible: pure functions.
#ifndef TRACETORCH_PROTOCOL_AGENT_PROTO_H_
#define TRACETORCH_PROTOCOL_AGENT_PROTO_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "protocol/events.h"
#include "protocol/wire.h"
#include "tracetorch/v1/agent.pb.h"

namespace tracetorch::protocol {

// One decoded AgentMessage: `kind` says which member holds it.
struct AgentMessage {
  enum class Kind { kNone, kHello, kLayerTable, kEvents, kHeartbeat, kEnd };
  Kind kind = Kind::kNone;  // kNone: a message without a kind.
  Hello hello;
  std::vector<LayerDecl> layers;  // kLayerTable, in the table's order.
  std::string events;             // kEvents: the EventBatch's bytes (frame_decoder.h).
  Heartbeat heartbeat;
  End end;
};

// Decodes an AgentMessage's bytes (no frame header). InvalidArgument when they are not one
// (exactly where libprotobuf's parser refuses them).
//
// Example:
//   absl::StatusOr<AgentMessage> m = DecodeAgentMessage(payload);
//   if (m.ok() && m->kind == AgentMessage::Kind::kHello) Open(m->hello);
absl::StatusOr<AgentMessage> DecodeAgentMessage(std::string_view payload);

// Appends one DaemonMessage frame (u32 LE length, payload) holding `reply`: a Welcome (session_id,
// resumed, durable_sequence when set, durable_events), an IngestError (message, code, fatal) or a
// Durable (durable_sequence, durable_events), by reply.kind; kUnknown: a message without a kind.
// wire::ParseDaemonReply reads it back.
void AppendDaemonFrame(const wire::DaemonReply& reply, std::string* out);
// The same message as the generated type.
void ToProto(const wire::DaemonReply& reply, v1::DaemonMessage* out);

// Field for field; a round trip is lossless.
ProcessIdentity FromProto(const v1::ProcessIdentity& identity);
void ToProto(const ProcessIdentity& identity, v1::ProcessIdentity* out);
Hello FromProto(const v1::Hello& hello);
void ToProto(const Hello& hello, v1::Hello* out);
std::vector<LayerDecl> FromProto(const v1::LayerTable& table);
void ToProto(const std::vector<LayerDecl>& layers, v1::LayerTable* out);
Heartbeat FromProto(const v1::Heartbeat& heartbeat);
End FromProto(const v1::End& end);
void ToProto(const End& end, v1::End* out);

}  // namespace tracetorch::protocol

#endif  // TRACETORCH_PROTOCOL_AGENT_PROTO_H_
