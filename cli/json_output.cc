#include "cli/json_output.h"

#include <set>
#include <string>
#include <string_view>
#include <variant>

#include "absl/container/flat_hash_set.h"
#include "cli/session_labels.h"
#include "protocol/record_proto.h"
#include "trace/json.h"
#include "trace/json_writer.h"
#include "view/labels.h"

namespace tracetorch::cli {

using ::tracetorch::view::ApplyFilter;
using ::tracetorch::view::FormatUnixTime;
using ::tracetorch::view::LayerFilter;
namespace {

// The fields of a session: the watch documents carry fewer than the `sessions` listing.
enum class SessionFields { kWatch, kListing };

void OptionalInt(bool has, int64_t value, JsonWriter& w) {
  if (has) {
    w.Int(value);
  } else {
    w.Null();
  }
}

// `daemon`, when not empty, is the address of the daemon the session lives on (first key).
void WriteSession(const v1::SessionInfo& s, SessionFields fields, JsonWriter& w,
                  std::string_view daemon = {}) {
  const v1::ProcessIdentity& id = s.identity();
  const bool listing = fields == SessionFields::kListing;
  w.BeginObject();
  if (!daemon.empty()) {
    w.PlainKey("daemon");
    w.String(daemon);
  }
  w.PlainKey("session_id");
  w.String(s.session_id());
  w.PlainKey("state");
  w.String(SessionStateName(s));
  w.PlainKey("pid");
  w.Int(id.pid());
  w.PlainKey("host");
  w.String(id.host());
  w.PlainKey("rank");
  OptionalInt(id.has_rank(), id.rank(), w);
  if (listing) {
    w.PlainKey("local_rank");
    OptionalInt(id.has_local_rank(), id.local_rank(), w);
    w.PlainKey("world_size");
    OptionalInt(id.has_world_size(), id.world_size(), w);
  }
  w.PlainKey("job_id");
  w.String(id.job_id());
  w.PlainKey("model");
  w.String(id.model_name());
  if (listing) {
    w.PlainKey("started");
    w.String(FormatUnixTime(s.started_unix_ns()));
  }
  w.PlainKey("started_unix_ns");
  w.Int(s.started_unix_ns());
  w.PlainKey("ended_unix_ns");
  w.Int(s.ended_unix_ns());
  w.PlainKey("events");
  w.UInt(s.events());
  w.PlainKey("dropped_events");
  w.UInt(s.dropped_events());
  w.PlainKey("rejected_events");
  w.UInt(s.rejected_events());
  if (s.has_flight()) {
    const v1::FlightStatus& f = s.flight();
    w.PlainKey("flight");
    w.BeginObject();
    w.PlainKey("recorder");
    w.Bool(f.recorder());
    w.PlainKey("position");
    w.String(f.position());
    w.PlainKey("step");
    w.UInt(f.step());
    w.PlainKey("phase");
    w.String(f.phase());
    w.PlainKey("layer");
    w.String(f.layer());
    w.PlainKey("moved_unix_ns");
    w.Int(f.moved_unix_ns());
    w.PlainKey("stalled");
    w.Bool(f.stalled());
    w.PlainKey("stalled_since_unix_ns");
    w.Int(f.stalled_since_unix_ns());
    w.PlainKey("stall_threshold_s");
    w.Double(f.stall_threshold_s());
    w.PlainKey("stalls");
    w.UInt(f.stalls());
    w.PlainKey("exit");
    if (f.has_exit()) {
      w.String(f.exit().description());
    } else {
      w.Null();
    }
    w.PlainKey("bundles");
    w.UInt(f.bundles());
    w.EndObject();
  }
  w.EndObject();
}

template <typename Values>
void WriteDoubles(const Values& values, JsonWriter& w) {
  w.BeginArray();
  for (double v : values) w.Double(v);
  w.EndArray();
}

// "record" (filtered) and "history" (of the layers shown) of a snapshot, as two keys.
void WriteRecordAndHistory(const v1::Snapshot& snapshot, const LayerFilter& filter, JsonWriter& w) {
  const TraceRecord record = ApplyFilter(FromProto(snapshot.record()), filter);
  absl::flat_hash_set<std::string> shown;
  for (const LayerTrace& layer : record.layers) shown.insert(layer.full_name);
  w.PlainKey("record");
  w.RawValue(TraceToJson(record, JsonStyle{.indent = 0}));
  w.PlainKey("history");
  w.BeginArray();
  for (const v1::LayerHistory& h : snapshot.history()) {
    if (!filter.empty() && !shown.contains(h.full_name())) continue;
    w.BeginObject();
    w.PlainKey("full_name");
    w.String(h.full_name());
    w.PlainKey("steps");
    w.BeginArray();
    for (uint64_t step : h.steps()) w.UInt(step);
    w.EndArray();
    w.PlainKey("latency_ms");
    WriteDoubles(h.latency_ms(), w);
    w.PlainKey("output_std");
    WriteDoubles(h.output_std(), w);
    w.PlainKey("grad_norm");
    WriteDoubles(h.grad_norm(), w);
    w.PlainKey("non_finite");
    w.BeginArray();
    for (bool flag : h.non_finite()) w.Bool(flag);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

std::string_view KindName(const v1::WatchUpdate& update) {
  switch (update.kind_case()) {
    case v1::WatchUpdate::kFull:
      return "full";
    case v1::WatchUpdate::kDelta:
      return "delta";
    case v1::WatchUpdate::kSessionEnded:
      return "session_ended";
    case v1::WatchUpdate::kShutdown:
      return "shutdown";
    case v1::WatchUpdate::kJob:
      return "job";
    case v1::WatchUpdate::KIND_NOT_SET:
      break;
  }
  return "unknown";
}

// "type", "kind", "sequence", "newest_event_unix_ns", "ended": what every watch document begins
// with.
void WriteUpdateHead(std::string_view type, const v1::WatchUpdate& update, bool ended,
                     JsonWriter& w) {
  w.PlainKey("type");
  w.String(type);
  w.PlainKey("kind");
  w.String(KindName(update));
  w.PlainKey("sequence");
  w.UInt(update.sequence());
  w.PlainKey("newest_event_unix_ns");
  w.Int(update.newest_event_unix_ns());
  w.PlainKey("ended");
  w.Bool(ended);
}

}  // namespace

std::string WatchUpdateToJson(const v1::WatchUpdate& update, const protocol::WatchState& state,
                              const LayerFilter& filter) {
  std::string out;
  JsonWriter w(/*indent=*/0, &out);
  const bool ended = state.ended().has_value();
  w.BeginObject();
  if (state.has_job()) {
    const v1::JobSnapshot& job = state.job();
    WriteUpdateHead("job", update, ended, w);
    w.PlainKey("job_id");
    w.String(job.job_id());
    w.PlainKey("ranks");
    w.BeginArray();
    for (const v1::Snapshot& rank : job.ranks()) {
      w.BeginObject();
      w.PlainKey("session");
      WriteSession(rank.session(), SessionFields::kWatch, w);
      WriteRecordAndHistory(rank, filter, w);
      w.EndObject();
    }
    w.EndArray();
    w.PlainKey("divergences");
    w.BeginArray();
    for (const v1::Anomaly& divergence : job.divergences())
      WriteAnomalyJson(FromProto(divergence), w);
    w.EndArray();
  } else {
    WriteUpdateHead("update", update, ended, w);
    w.PlainKey("session");
    if (ended) {
      WriteSession(*state.ended(), SessionFields::kWatch, w);
    } else if (state.has_snapshot()) {
      WriteSession(state.snapshot().session(), SessionFields::kWatch, w);
    } else {
      w.Null();
    }
    if (state.has_snapshot()) {
      WriteRecordAndHistory(state.snapshot(), filter, w);
    } else {
      w.PlainKey("record");
      w.Null();
      w.PlainKey("history");
      w.BeginArray();
      w.EndArray();
    }
  }
  w.EndObject();
  w.Finish();
  return out;
}

std::string MergedJobToJson(const v1::JobSnapshot& job,
                            const std::vector<std::string>& rank_daemons,
                            const std::vector<DaemonLinkJson>& daemons, uint64_t sequence,
                            bool ended, const LayerFilter& filter) {
  std::string out;
  JsonWriter w(/*indent=*/0, &out);
  w.BeginObject();
  w.PlainKey("type");
  w.String("job");
  w.PlainKey("kind");
  w.String("merged");
  w.PlainKey("sequence");
  w.UInt(sequence);
  w.PlainKey("ended");
  w.Bool(ended);
  w.PlainKey("job_id");
  w.String(job.job_id());
  w.PlainKey("daemons");
  w.BeginArray();
  for (const DaemonLinkJson& d : daemons) {
    w.BeginObject();
    w.PlainKey("address");
    w.String(d.address);
    w.PlainKey("status");
    w.String(d.status);
    w.PlainKey("message");
    w.String(d.message);
    w.PlainKey("ranks");
    w.BeginArray();
    for (int rank : d.ranks) w.Int(rank);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.PlainKey("ranks");
  w.BeginArray();
  for (int i = 0; i < job.ranks_size(); ++i) {
    w.BeginObject();
    w.PlainKey("daemon");
    w.String(static_cast<size_t>(i) < rank_daemons.size() ? rank_daemons[static_cast<size_t>(i)]
                                                          : std::string());
    w.PlainKey("session");
    WriteSession(job.ranks(i).session(), SessionFields::kWatch, w);
    WriteRecordAndHistory(job.ranks(i), filter, w);
    w.EndObject();
  }
  w.EndArray();
  w.PlainKey("divergences");
  w.BeginArray();
  std::set<int64_t> flagged;
  for (const v1::Anomaly& divergence : job.divergences()) {
    const Anomaly a = FromProto(divergence);
    const DetailValue* rank = FindDetail(a.details, "rank");
    if (rank != nullptr && std::holds_alternative<int64_t>(*rank)) {
      flagged.insert(std::get<int64_t>(*rank));
    }
    WriteAnomalyJson(a, w);
  }
  w.EndArray();
  w.PlainKey("flagged_ranks");
  w.BeginArray();
  for (int64_t rank : flagged) w.Int(rank);
  w.EndArray();
  w.EndObject();
  w.Finish();
  return out;
}

std::string WatchStatusToJson(std::string_view status, std::string_view message) {
  std::string out;
  JsonWriter w(/*indent=*/0, &out);
  w.BeginObject();
  w.PlainKey("type");
  w.String("status");
  w.PlainKey("status");
  w.String(status);
  w.PlainKey("message");
  w.String(message);
  w.EndObject();
  w.Finish();
  return out;
}

std::string SessionsToJson(const v1::ListSessionsResponse& list,
                           const std::vector<std::string>& daemons) {
  std::string out;
  JsonWriter w(/*indent=*/2, &out);
  w.BeginArray();
  for (int i = 0; i < list.sessions_size(); ++i) {
    const size_t at = static_cast<size_t>(i);
    WriteSession(list.sessions(i), SessionFields::kListing, w,
                 at < daemons.size() ? std::string_view(daemons[at]) : std::string_view());
  }
  w.EndArray();
  w.Finish();
  return out;
}

std::string BaselinesToJson(const v1::ListBaselinesResponse& list) {
  std::string out;
  JsonWriter w(/*indent=*/2, &out);
  w.BeginArray();
  for (const v1::BaselineInfo& b : list.baselines()) {
    w.BeginObject();
    w.PlainKey("name");
    w.String(b.name());
    w.PlainKey("model");
    w.String(b.model_name());
    w.PlainKey("layers");
    w.UInt(b.layers());
    w.PlainKey("has_history");
    w.Bool(b.has_history());
    w.PlainKey("source");
    w.String(b.source());
    w.PlainKey("created");
    w.String(FormatUnixTime(b.created_unix_ns()));
    w.PlainKey("created_unix_ns");
    w.Int(b.created_unix_ns());
    w.EndObject();
  }
  w.EndArray();
  w.Finish();
  return out;
}

}  // namespace tracetorch::cli
