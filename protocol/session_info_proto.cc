#include "protocol/session_info_proto.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/util/json_util.h"
#include "protocol/agent_proto.h"
#include "protocol/record_proto.h"

namespace tracetorch::protocol {
namespace {

int64_t UnixNsOrZero(absl::Time t) { return t == absl::InfinitePast() ? 0 : absl::ToUnixNanos(t); }
absl::Time TimeOrPast(int64_t unix_ns) {
  return unix_ns == 0 ? absl::InfinitePast() : absl::FromUnixNanos(unix_ns);
}

void FlightToProto(const FlightStatus& f, v1::FlightStatus* out) {
  if (!f.recorder && !f.exit.has_value() && f.bundles == 0) return;
  out->set_recorder(f.recorder);
  out->set_position(f.position);
  out->set_step(f.step);
  out->set_phase(f.phase);
  out->set_layer(f.layer);
  out->set_moved_unix_ns(UnixNsOrZero(f.moved));
  out->set_since_unix_ns(UnixNsOrZero(f.since));
  out->set_stalled(f.stalled);
  out->set_stalled_since_unix_ns(f.stalled ? UnixNsOrZero(f.stalled_since) : 0);
  out->set_stall_threshold_s(absl::ToDoubleSeconds(f.stall_threshold));
  out->set_median_step_s(f.median_step ? absl::ToDoubleSeconds(*f.median_step) : 0.0);
  out->set_stalls(f.stalls);
  if (f.exit.has_value()) {
    v1::ProcessExit* e = out->mutable_exit();
    e->set_known(f.exit->known);
    e->set_signal(f.exit->signal);
    e->set_code(f.exit->code);
    e->set_core_dumped(f.exit->core_dumped);
    e->set_description(f.exit->description);
  }
  out->set_bundles(f.bundles);
}

FlightStatus FlightFromProto(const v1::FlightStatus& f) {
  FlightStatus out;
  out.recorder = f.recorder();
  out.position = f.position();
  out.step = f.step();
  out.phase = f.phase();
  out.layer = f.layer();
  out.moved = TimeOrPast(f.moved_unix_ns());
  out.since = TimeOrPast(f.since_unix_ns());
  out.stalled = f.stalled();
  out.stalled_since = TimeOrPast(f.stalled_since_unix_ns());
  out.stall_threshold = absl::Seconds(f.stall_threshold_s());
  if (f.median_step_s() != 0) out.median_step = absl::Seconds(f.median_step_s());
  out.stalls = f.stalls();
  if (f.has_exit()) {
    const v1::ProcessExit& e = f.exit();
    out.exit = ProcessExit{.known = e.known(),
                           .signal = e.signal(),
                           .code = e.code(),
                           .core_dumped = e.core_dumped(),
                           .description = e.description()};
  }
  out.bundles = f.bundles();
  return out;
}

// `message` as protobuf JSON with the proto's field names, indented or on one line; Internal
// naming `what` when protobuf cannot encode it.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message, bool indent,
                                   absl::string_view what) {
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = indent;
  print.preserve_proto_field_names = true;
  std::string json;
  if (auto s = google::protobuf::util::MessageToJsonString(message, &json, print); !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot encode ", what, ": ", s.message().as_string()));
  }
  return json;
}

// Parses protobuf JSON into `message`, ignoring unknown fields; InvalidArgument "not a tracetorchd
// <what>: ..." otherwise.
absl::Status FromJson(std::string_view json, absl::string_view what,
                      google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  if (auto s = google::protobuf::util::JsonStringToMessage(
          google::protobuf::StringPiece(json.data(), json.size()), message, parse);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a tracetorchd ", what, ": ", s.message().as_string()));
  }
  return absl::OkStatus();
}

}  // namespace

v1::SessionState ToProto(SessionState state) {
  switch (state) {
    case SessionState::kLive:
      return v1::SESSION_STATE_LIVE;
    case SessionState::kFinished:
      return v1::SESSION_STATE_FINISHED;
    case SessionState::kAborted:
      return v1::SESSION_STATE_ABORTED;
  }
  return v1::SESSION_STATE_UNSPECIFIED;
}

SessionState FromProto(v1::SessionState state) {
  switch (state) {
    case v1::SESSION_STATE_LIVE:
      return SessionState::kLive;
    case v1::SESSION_STATE_FINISHED:
      return SessionState::kFinished;
    default:
      return SessionState::kAborted;
  }
}

void ToProto(const SessionInfo& info, v1::SessionInfo* out) {
  out->set_session_id(info.session_id);
  out->set_state(ToProto(info.state));
  ToProto(info.identity, out->mutable_identity());
  out->set_started_unix_ns(UnixNsOrZero(info.started));
  out->set_ended_unix_ns(UnixNsOrZero(info.ended));
  out->set_events(info.events);
  out->set_dropped_events(info.dropped_events);
  out->set_rejected_events(info.rejected_events);
  out->set_peer_uid(info.peer_uid);
  out->set_peer_gid(info.peer_gid);
  out->set_peer_pid(info.peer_pid);
  FlightToProto(info.flight, out->mutable_flight());  // Present (empty) when it says nothing.
  if (info.nan_found != absl::InfinitePast()) {
    out->mutable_flight()->set_nan_found_unix_ns(absl::ToUnixNanos(info.nan_found));
    if (info.nan_origin.has_value()) {
      tracetorch::ToProto(*info.nan_origin, out->mutable_flight()->mutable_nan_origin());
    }
  }
}

SessionInfo FromProto(const v1::SessionInfo& info) {
  SessionInfo out;
  out.session_id = info.session_id();
  out.state = FromProto(info.state());
  out.identity = FromProto(info.identity());
  out.started = TimeOrPast(info.started_unix_ns());
  out.ended = TimeOrPast(info.ended_unix_ns());
  out.events = info.events();
  out.dropped_events = info.dropped_events();
  out.rejected_events = info.rejected_events();
  out.peer_uid = info.peer_uid();
  out.peer_gid = info.peer_gid();
  out.peer_pid = info.peer_pid();
  if (info.has_flight()) {
    out.flight = FlightFromProto(info.flight());
    out.nan_found = TimeOrPast(info.flight().nan_found_unix_ns());
    if (info.flight().has_nan_origin()) {
      out.nan_origin = tracetorch::FromProto(info.flight().nan_origin());
    }
  }
  return out;
}

void ToProto(const SessionIndexEntry& entry, v1::SessionIndexEntry* out) {
  ToProto(entry.info, out->mutable_info());
  out->set_client_dropped_events(entry.client_dropped_events);
  out->set_lost_events(entry.lost_events);
  out->set_last_sequence(entry.last_sequence);
}

SessionIndexEntry FromProto(const v1::SessionIndexEntry& entry) {
  return SessionIndexEntry{.info = FromProto(entry.info()),
                           .client_dropped_events = entry.client_dropped_events(),
                           .lost_events = entry.lost_events(),
                           .last_sequence = entry.last_sequence()};
}

void ToProto(const LayerSteps& layer, v1::LayerHistory* out) {
  out->set_full_name(layer.full_name);
  out->mutable_steps()->Assign(layer.steps.begin(), layer.steps.end());
  out->mutable_latency_ms()->Assign(layer.latency_ms.begin(), layer.latency_ms.end());
  out->mutable_output_std()->Assign(layer.output_std.begin(), layer.output_std.end());
  out->mutable_grad_norm()->Assign(layer.grad_norm.begin(), layer.grad_norm.end());
  out->mutable_non_finite()->Reserve(static_cast<int>(layer.non_finite.size()));
  for (bool b : layer.non_finite) out->add_non_finite(b);
}

void ToProto(const Snapshot& snapshot, v1::Snapshot* out) {
  ToProto(snapshot.session, out->mutable_session());
  tracetorch::ToProto(snapshot.record, out->mutable_record());
  out->mutable_history()->Reserve(static_cast<int>(snapshot.history.layers.size()));
  for (const LayerSteps& l : snapshot.history.layers) ToProto(l, out->add_history());
}

Snapshot FromProto(const v1::Snapshot& snapshot) {
  Snapshot out;
  out.session = FromProto(snapshot.session());
  out.record = tracetorch::FromProto(snapshot.record());
  out.history = StepHistoryFromProto(snapshot.history());
  return out;
}

absl::StatusOr<std::string> IndexEntryToJson(const SessionIndexEntry& entry) {
  v1::SessionIndexEntry message;
  ToProto(entry, &message);
  return ToJson(message, /*indent=*/false,
                absl::StrCat("the accounting of session ", entry.info.session_id));
}

absl::StatusOr<SessionIndexEntry> IndexEntryFromJson(std::string_view json) {
  v1::SessionIndexEntry message;
  if (absl::Status s = FromJson(json, "session index entry", &message); !s.ok()) return s;
  return FromProto(message);
}

absl::StatusOr<std::string> SessionIndexToJson(const std::vector<SessionIndexEntry>& entries) {
  v1::SessionIndex index;
  index.mutable_sessions()->Reserve(static_cast<int>(entries.size()));
  for (const SessionIndexEntry& e : entries) ToProto(e, index.add_sessions());
  return ToJson(index, /*indent=*/true, "the session index");
}

absl::StatusOr<std::vector<SessionIndexEntry>> SessionIndexFromJson(std::string_view json) {
  v1::SessionIndex index;
  if (absl::Status s = FromJson(json, "session index", &index); !s.ok()) return s;
  std::vector<SessionIndexEntry> out;
  out.reserve(index.sessions_size());
  for (const v1::SessionIndexEntry& e : index.sessions()) out.push_back(FromProto(e));
  return out;
}

}  // namespace tracetorch::protocol
