// Conversions between protocol/session_info.h's plain types and tracetorch.v1's messages
// (proto/tracetorch/v1/service.proto), and the JSON form tracetorchd keeps on disk (the session
// index, DATA_DIR/index.json, and each snapshot file's accounting: protobuf JSON with the proto's
// field names).
//
// Field for field. Times travel as Unix nanoseconds (0: unset), durations as seconds; a round trip
// of what the daemon wrote is exact: ToProto(FromProto(m)) == m for every message ToProto made.
// A FlightStatus travels only when it says something (a recorder, an exit or a bundle); the NaN
// origin travels inside it (FlightStatus.nan_origin, nan_found_unix_ns) when one was found.
//
// Thread-compatible: pure functions.
#ifndef TRACETORCH_PROTOCOL_SESSION_INFO_PROTO_H_
#define TRACETORCH_PROTOCOL_SESSION_INFO_PROTO_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "protocol/session_info.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::protocol {

v1::SessionState ToProto(SessionState state);
// SESSION_STATE_UNSPECIFIED (an index written by hand) reads as aborted.
SessionState FromProto(v1::SessionState state);

void ToProto(const SessionInfo& info, v1::SessionInfo* out);
SessionInfo FromProto(const v1::SessionInfo& info);

void ToProto(const SessionIndexEntry& entry, v1::SessionIndexEntry* out);
SessionIndexEntry FromProto(const v1::SessionIndexEntry& entry);

// One layer's history; StepHistoryFromProto (protocol/record_proto.h) reads a snapshot's back.
void ToProto(const LayerSteps& layer, v1::LayerHistory* out);

void ToProto(const Snapshot& snapshot, v1::Snapshot* out);
Snapshot FromProto(const v1::Snapshot& snapshot);

// One entry as a single line of JSON (a snapshot file's accounting). Internal when protobuf cannot
// encode it (it always can: a failure is a bug, reported rather than thrown).
absl::StatusOr<std::string> IndexEntryToJson(const SessionIndexEntry& entry);
// InvalidArgument when `json` is not a SessionIndexEntry; unknown fields are ignored (a newer
// daemon's file).
absl::StatusOr<SessionIndexEntry> IndexEntryFromJson(std::string_view json);

// The whole index (tracetorch.v1.SessionIndex), indented, oldest first.
absl::StatusOr<std::string> SessionIndexToJson(const std::vector<SessionIndexEntry>& entries);
// InvalidArgument when `json` is not a SessionIndex; unknown fields are ignored.
absl::StatusOr<std::vector<SessionIndexEntry>> SessionIndexFromJson(std::string_view json);

}  // namespace tracetorch::protocol

#endif  // TRACETORCH_PROTOCOL_SESSION_INFO_PROTO_H_
