#include "protocol/agent_proto.h"

#include <utility>

#include "absl/status/status.h"

namespace tracetorch::protocol {

absl::StatusOr<AgentMessage> DecodeAgentMessage(std::string_view payload) {
  v1::AgentMessage m;
  if (!m.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::InvalidArgumentError("frame is not a tracetorch.v1.AgentMessage");
  }
  AgentMessage out;
  switch (m.kind_case()) {
    case v1::AgentMessage::kHello:
      out.kind = AgentMessage::Kind::kHello;
      out.hello = FromProto(m.hello());
      break;
    case v1::AgentMessage::kLayerTable:
      out.kind = AgentMessage::Kind::kLayerTable;
      out.layers = FromProto(m.layer_table());
      break;
    case v1::AgentMessage::kEvents:
      out.kind = AgentMessage::Kind::kEvents;
      out.events = m.events().SerializeAsString();
      break;
    case v1::AgentMessage::kHeartbeat:
      out.kind = AgentMessage::Kind::kHeartbeat;
      out.heartbeat = FromProto(m.heartbeat());
      break;
    case v1::AgentMessage::kEnd:
      out.kind = AgentMessage::Kind::kEnd;
      out.end = FromProto(m.end());
      break;
    case v1::AgentMessage::KIND_NOT_SET:
      break;
  }
  return out;
}

void ToProto(const wire::DaemonReply& reply, v1::DaemonMessage* out) {
  out->Clear();
  switch (reply.kind) {
    case wire::DaemonReply::Kind::kWelcome: {
      v1::Welcome* w = out->mutable_welcome();
      w->set_session_id(reply.session_id);
      w->set_resumed(reply.resumed);
      if (reply.durable_sequence.has_value()) w->set_durable_sequence(*reply.durable_sequence);
      w->set_durable_events(reply.durable_events);
      break;
    }
    case wire::DaemonReply::Kind::kError: {
      v1::IngestError* e = out->mutable_error();
      e->set_message(reply.message);
      e->set_code(reply.code);
      e->set_fatal(reply.fatal);
      break;
    }
    case wire::DaemonReply::Kind::kDurable: {
      v1::Durable* d = out->mutable_durable();
      d->set_sequence(reply.durable_sequence.value_or(0));
      d->set_events(reply.durable_events);
      break;
    }
    case wire::DaemonReply::Kind::kUnknown:
      break;
  }
}

void AppendDaemonFrame(const wire::DaemonReply& reply, std::string* out) {
  v1::DaemonMessage message;
  ToProto(reply, &message);
  const size_t size = message.ByteSizeLong();
  const size_t start = out->size();
  out->resize(start + wire::kFrameHeaderBytes + size);
  wire::PutFrameHeader(static_cast<uint32_t>(size), out->data() + start);
  message.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(out->data() + start + wire::kFrameHeaderBytes));
}

ProcessIdentity FromProto(const v1::ProcessIdentity& id) {
  ProcessIdentity out;
  out.pid = id.pid();
  out.host = id.host();
  out.start_time_unix_ns = id.start_time_unix_ns();
  if (id.has_rank()) out.rank = id.rank();
  if (id.has_local_rank()) out.local_rank = id.local_rank();
  if (id.has_world_size()) out.world_size = id.world_size();
  out.job_id = id.job_id();
  out.model_name = id.model_name();
  out.torch_version = id.torch_version();
  out.python_version = id.python_version();
  out.platform = id.platform();
  out.cuda_available = id.cuda_available();
  out.cuda_version = id.cuda_version();
  out.active_device = id.active_device();
  return out;
}

void ToProto(const ProcessIdentity& id, v1::ProcessIdentity* out) {
  out->Clear();
  out->set_pid(id.pid);
  out->set_host(id.host);
  out->set_start_time_unix_ns(id.start_time_unix_ns);
  if (id.rank.has_value()) out->set_rank(*id.rank);
  if (id.local_rank.has_value()) out->set_local_rank(*id.local_rank);
  if (id.world_size.has_value()) out->set_world_size(*id.world_size);
  out->set_job_id(id.job_id);
  out->set_model_name(id.model_name);
  out->set_torch_version(id.torch_version);
  out->set_python_version(id.python_version);
  out->set_platform(id.platform);
  out->set_cuda_available(id.cuda_available);
  out->set_cuda_version(id.cuda_version);
  out->set_active_device(id.active_device);
}

Hello FromProto(const v1::Hello& hello) {
  Hello out;
  out.protocol_version = static_cast<int32_t>(hello.protocol_version());
  out.identity = FromProto(hello.identity());
  out.resume_session_id = hello.resume_session_id();
  out.dropped_events = hello.dropped_events();
  out.sent_events = hello.sent_events();
  if (hello.has_replay_first_event()) out.replay_first_event = hello.replay_first_event();
  if (hello.has_flight_recorder()) {
    out.flight_recorder = true;
    out.flight_layout_version = hello.flight_recorder().layout_version();
    out.flight_region_bytes = hello.flight_recorder().region_bytes();
  }
  return out;
}

void ToProto(const Hello& hello, v1::Hello* out) {
  out->Clear();
  out->set_protocol_version(static_cast<v1::ProtocolVersion>(hello.protocol_version));
  ToProto(hello.identity, out->mutable_identity());
  out->set_resume_session_id(hello.resume_session_id);
  out->set_dropped_events(hello.dropped_events);
  out->set_sent_events(hello.sent_events);
  if (hello.replay_first_event.has_value()) out->set_replay_first_event(*hello.replay_first_event);
  if (hello.flight_recorder) {
    out->mutable_flight_recorder()->set_layout_version(hello.flight_layout_version);
    out->mutable_flight_recorder()->set_region_bytes(hello.flight_region_bytes);
  }
}

std::vector<LayerDecl> FromProto(const v1::LayerTable& table) {
  std::vector<LayerDecl> out;
  out.reserve(static_cast<size_t>(table.layers_size()));
  for (const v1::LayerDecl& d : table.layers()) {
    LayerDecl& l = out.emplace_back();
    l.id = d.id();
    l.info.name = d.name();
    l.info.type = d.type();
    l.info.full_name = d.full_name();
    l.info.depth = d.depth();
    l.info.params = d.params();
  }
  return out;
}

void ToProto(const std::vector<LayerDecl>& layers, v1::LayerTable* out) {
  out->Clear();
  for (const LayerDecl& l : layers) {
    v1::LayerDecl* d = out->add_layers();
    d->set_id(l.id);
    d->set_name(l.info.name);
    d->set_type(l.info.type);
    d->set_full_name(l.info.full_name);
    d->set_depth(l.info.depth);
    d->set_params(l.info.params);
  }
}

Heartbeat FromProto(const v1::Heartbeat& heartbeat) {
  return Heartbeat{.unix_ns = heartbeat.unix_ns(), .dropped_events = heartbeat.dropped_events()};
}

End FromProto(const v1::End& end) {
  End out;
  if (end.has_total_time_ms()) out.total_time_ms = end.total_time_ms();
  out.dropped_events = end.dropped_events();
  out.hook_errors = end.hook_errors();
  return out;
}

void ToProto(const End& end, v1::End* out) {
  out->Clear();
  if (end.total_time_ms.has_value()) out->set_total_time_ms(*end.total_time_ms);
  out->set_dropped_events(end.dropped_events);
  out->set_hook_errors(end.hook_errors);
}

}  // namespace tracetorch::protocol
