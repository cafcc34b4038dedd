// Conversions between the core's TraceRecord (trace/record.h) and its wire form,
// tracetorch.v1.TraceRecord (proto/tracetorch/v1/trace.proto). Field for field; `optional` proto
// fields carry std::optional values, so a round trip is lossless (FromProto(ToProto(r)) == r).
// The op graph travels as its JSON document (op_graph_json, trace/op_graph_json.h, minified);
// FromProto drops one that does not read as an op graph (op_graph stays null).
//
// Thread-compatible: pure functions.
#ifndef TRACETORCH_PROTOCOL_RECORD_PROTO_H_
#define TRACETORCH_PROTOCOL_RECORD_PROTO_H_

#include "google/protobuf/repeated_ptr_field.h"
#include "trace/diff.h"
#include "trace/record.h"
#include "trace/step_history.h"
#include "tracetorch/v1/service.pb.h"
#include "tracetorch/v1/trace.pb.h"

namespace tracetorch {

void ToProto(const TraceRecord& record, v1::TraceRecord* out);
TraceRecord FromProto(const v1::TraceRecord& record);

void ToProto(const TraceMetadata& metadata, v1::TraceMetadata* out);
TraceMetadata FromProto(const v1::TraceMetadata& metadata);

void ToProto(const LayerTrace& layer, v1::LayerTrace* out);
LayerTrace FromProto(const v1::LayerTrace& layer);

void ToProto(const Anomaly& anomaly, v1::Anomaly* out);
Anomaly FromProto(const v1::Anomaly& anomaly);

void ToProto(const NanOrigin& origin, v1::NanOrigin* out);
NanOrigin FromProto(const v1::NanOrigin& origin);

// Shared by the trace model and the agent's TensorEvent (agent.proto).
TensorStats FromProto(const v1::TensorStats& stats);

// A diff (trace/diff.h) on the wire, lossless both ways. The proto's has_regressions and counts
// are written from the core's and not read back (the core derives them from the entries).
void ToProto(const TraceDiff& diff, v1::TraceDiff* out);
TraceDiff FromProto(const v1::TraceDiff& diff);

// The per-step forward latencies of a snapshot's history (LayerHistory.latency_ms by full_name),
// for the noise-aware diff. NaN points (no forward that step) are dropped.
LatencySamples LatencySamplesFromHistory(
    const google::protobuf::RepeatedPtrField<v1::LayerHistory>& history);

// A snapshot's (or baseline's) per-step history as the core's StepHistory, entry for entry (the
// WatchUpdate-only fields append and thin_before_step are not carried).
StepHistory StepHistoryFromProto(
    const google::protobuf::RepeatedPtrField<v1::LayerHistory>& history);

}  // namespace tracetorch

#endif  // TRACETORCH_PROTOCOL_RECORD_PROTO_H_
