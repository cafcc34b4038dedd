#include "daemon/metrics/daemon_metrics.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "protocol/session_info_proto.h"
#include "spdlog/spdlog.h"
#include "trace/divergence.h"
#include "trace/forward_passes.h"

namespace tracetorch::daemon {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(std::string name, std::string help, bool counter) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = counter ? MetricType::Counter : MetricType::Gauge;
  return f;
}

void Add(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (family.type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  family.metric.push_back(std::move(m));
}

// Reads a numeric DaemonStats field by name through reflection; 0 when it has another type.
double FieldValue(const v1::DaemonStats& stats, const google::protobuf::FieldDescriptor* field) {
  const google::protobuf::Reflection* r = stats.GetReflection();
  switch (field->cpp_type()) {
    case google::protobuf::FieldDescriptor::CPPTYPE_UINT64:
      return static_cast<double>(r->GetUInt64(stats, field));
    case google::protobuf::FieldDescriptor::CPPTYPE_INT64:
      return static_cast<double>(r->GetInt64(stats, field));
    case google::protobuf::FieldDescriptor::CPPTYPE_UINT32:
      return static_cast<double>(r->GetUInt32(stats, field));
    case google::protobuf::FieldDescriptor::CPPTYPE_INT32:
      return static_cast<double>(r->GetInt32(stats, field));
    case google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE:
      return r->GetDouble(stats, field);
    default:
      return 0;
  }
}

// The outermost layer (smallest depth; the slowest of those): its latest forward latency is
// the step's forward time.
const LayerTrace* Outermost(const TraceRecord& record) {
  const LayerTrace* best = nullptr;
  for (const LayerTrace& layer : record.layers) {
    if (!layer.latency_ms.has_value()) continue;
    if (best == nullptr || layer.depth < best->depth ||
        (layer.depth == best->depth && *layer.latency_ms > *best->latency_ms)) {
      best = &layer;
    }
  }
  return best;
}

std::vector<ClientMetric::Label> SessionLabels(const v1::SessionInfo& info) {
  const v1::ProcessIdentity& id = info.identity();
  return {{"session", info.session_id()},
          {"job_id", id.job_id()},
          {"rank", id.has_rank() ? absl::StrCat(id.rank()) : ""},
          {"model", id.model_name()}};
}

std::vector<ClientMetric::Label> With(std::vector<ClientMetric::Label> labels,
                                      std::vector<ClientMetric::Label> more) {
  labels.insert(labels.end(), std::make_move_iterator(more.begin()),
                std::make_move_iterator(more.end()));
  return labels;
}

// Rank divergence findings per session index: per job, each rank's most recently started live
// session, judged with DetectRankDivergence as the daemon's job view judges them.
std::vector<int64_t> DivergenceCounts(const std::vector<SessionSample>& sessions) {
  std::vector<int64_t> counts(sessions.size(), 0);
  std::map<std::string, std::map<int32_t, size_t>> jobs;  // job -> rank -> index.
  for (size_t i = 0; i < sessions.size(); ++i) {
    const v1::ProcessIdentity& id = sessions[i].info.identity();
    if (id.job_id().empty() || !id.has_rank()) continue;
    auto [it, inserted] = jobs[id.job_id()].emplace(id.rank(), i);
    if (!inserted &&
        sessions[i].info.started_unix_ns() >= sessions[it->second].info.started_unix_ns()) {
      it->second = i;
    }
  }
  for (const auto& [job, ranks] : jobs) {
    std::vector<RankTrace> traces;
    for (const auto& [rank, index] : ranks) {
      traces.push_back({rank, absl::StrCat("rank ", rank), &sessions[index].record});
    }
    for (const Anomaly& a : DetectRankDivergence(traces)) {
      const DetailValue* rank = FindDetail(a.details, "rank");
      if (rank == nullptr || !std::holds_alternative<int64_t>(*rank)) continue;
      auto it = ranks.find(static_cast<int32_t>(std::get<int64_t>(*rank)));
      if (it != ranks.end()) ++counts[it->second];
    }
  }
  return counts;
}

}  // namespace

const std::vector<StatsSeries>& StatsSeriesTable() {
  static const auto* const table = new std::vector<StatsSeries>{
      {"connections", "tracetorchd_connections", false, "Agent connections open now."},
      {"live_sessions", "tracetorchd_live_sessions", false, "Sessions in state live."},
      {"events_total", "tracetorchd_events_total", true,
       "Layer events (forward and backward) accepted into sessions."},
      {"events_per_second", "tracetorchd_events_per_second", false,
       "Accepted events per second over the last ~1 s window."},
      {"dropped_events", "tracetorchd_dropped_events_total", true,
       "Events the agents of in-memory sessions report dropped, plus events lost in flight "
       "across daemon restarts (falls when a session is evicted from memory)."},
      {"rejected_frames", "tracetorchd_rejected_frames_total", true,
       "Ingest frames refused: oversized, empty, unparseable, truncated, out of order."},
      {"watchers", "tracetorchd_watchers", false, "Watch streams open now."},
      {"sessions_total", "tracetorchd_sessions_known", false,
       "Sessions known: in memory plus the on-disk index."},
      {"sessions_in_memory", "tracetorchd_sessions_in_memory", false, "Sessions held in memory."},
      {"sessions_evicted", "tracetorchd_sessions_evicted_total", true,
       "Ended sessions moved out of memory (still on disk)."},
      {"rejected_events", "tracetorchd_rejected_events_total", true,
       "Events for layer ids never declared."},
      {"rejected_connections", "tracetorchd_rejected_connections_total", true,
       "Agent connections refused: allow-list, connection or session limits, bad Hello."},
      {"limit_hits", "tracetorchd_limit_hits_total", true, "Configured limits reached."},
      {"snapshots_written", "tracetorchd_snapshots_written_total", true,
       "Session snapshot files written."},
      {"snapshot_errors", "tracetorchd_snapshot_errors_total", true,
       "Session snapshot writes that failed (disk full, read-only, files removed)."},
      {"index_errors", "tracetorchd_index_errors_total", true, "Session index writes that failed."},
      {"baseline_errors", "tracetorchd_baseline_errors_total", true,
       "Baseline writes and removals that failed."},
      {"sessions_not_durable", "tracetorchd_sessions_not_durable", false,
       "Sessions whose latest snapshot write failed: held in memory, retried with back-off."},
      {"bytes_received", "tracetorchd_received_bytes_total", true,
       "Ingest bytes, frame headers included."},
      {"cpu_seconds", "tracetorchd_cpu_seconds_total", true,
       "The daemon's user and system CPU time."},
      {"rss_bytes", "tracetorchd_resident_memory_bytes", false, "The daemon's resident memory."},
      {"uptime_seconds", "tracetorchd_uptime_seconds", false, "Seconds since the daemon started."},
      {"watch_updates_sent", "tracetorchd_watch_updates_sent_total", true,
       "Updates written to viewers."},
      {"watch_updates_coalesced", "tracetorchd_watch_updates_coalesced_total", true,
       "Viewer states replaced by a newer one before a slow viewer took them."},
      {"unauthenticated_calls", "tracetorchd_unauthenticated_calls_total", true,
       "TCP calls refused with UNAUTHENTICATED."},
      {"ingest_memory_bytes", "tracetorchd_ingest_memory_bytes", false,
       "Ingest read-buffer memory reserved now beyond the base buffers."},
      {"ingest_memory_limit_bytes", "tracetorchd_ingest_memory_limit_bytes", false,
       "The ingest memory budget (--ingest-memory-mb)."},
      {"ingest_memory_peak_bytes", "tracetorchd_ingest_memory_peak_bytes", false,
       "The most ingest memory reserved at once."},
      {"ingest_memory_waits", "tracetorchd_ingest_memory_waits_total", true,
       "Frames that waited for other connections to release ingest memory."},
      {"connections_timed_out", "tracetorchd_connections_timed_out_total", true,
       "Connections closed for want of progress (no Hello, or no complete frame, in time)."},
      {"connections_evicted", "tracetorchd_connections_evicted_total", true,
       "Connections without a Hello closed to make room for newer ones (slots full)."},
      {"stalled_sessions", "tracetorchd_stalled_sessions", false,
       "Live sessions whose flight recorder position has not moved for their stall threshold."},
      {"stalls_total", "tracetorchd_stalls_total", true, "Stall episodes seen."},
      {"flight_recorders", "tracetorchd_flight_recorders", false,
       "Sessions followed now with the flight recorder their agent passed."},
      {"flight_recorders_refused", "tracetorchd_flight_recorders_refused_total", true,
       "Flight recorders passed by agents that the daemon refused (not a sealed memfd, ...)."},
      {"forensic_bundles_total", "tracetorchd_forensic_bundles_total", true,
       "Forensic bundles written (stalled, aborted, first NaN/Inf)."},
      {"forensic_bundle_errors", "tracetorchd_forensic_bundle_errors_total", true,
       "Forensic bundles that could not be written to the data directory (kept in memory)."},
  };
  return *table;
}

std::vector<MetricFamily> StatsFamilies(const v1::DaemonStats& stats) {
  const google::protobuf::Descriptor* d = stats.GetDescriptor();
  std::vector<MetricFamily> out;
  for (const StatsSeries& s : StatsSeriesTable()) {
    const google::protobuf::FieldDescriptor* field = d->FindFieldByName(s.field);
    if (field == nullptr) continue;
    MetricFamily f = Family(s.name, s.help, s.counter);
    Add(f, {}, FieldValue(stats, field));
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<MetricFamily> SessionFamilies(const std::vector<SessionSample>& sessions,
                                          const MetricsOptions& options) {
  MetricFamily steps = Family("tracetorchd_session_steps_total",
                              "Forward passes (steps) of the live session so far.", true);
  MetricFamily events =
      Family("tracetorchd_session_events_total", "Layer events the session sent.", true);
  MetricFamily dropped = Family("tracetorchd_session_dropped_events_total",
                                "Events the session's agent dropped or lost in flight.", true);
  MetricFamily anomalies =
      Family("tracetorchd_session_anomalies",
             "The session's current anomaly findings, by type and severity.", false);
  MetricFamily nan_origin =
      Family("tracetorchd_session_nan_origin_known",
             "1 when the layer where NaN/Inf first appeared is known.", false);
  MetricFamily step_time =
      Family("tracetorchd_session_step_seconds",
             "The latest forward pass of the session's outermost layer, in seconds.", false);
  MetricFamily newest = Family("tracetorchd_session_last_event_timestamp_seconds",
                               "Unix time when the session's newest events arrived.", false);
  MetricFamily divergence =
      Family("tracetorchd_session_rank_divergences",
             "Cross-rank divergence findings naming this session's rank (layers whose latency or "
             "gradient norm departs from the job's other live ranks).",
             false);
  MetricFamily stalled =
      Family("tracetorchd_session_stalled",
             "1 while the session is stalled: live, its process alive, and its flight recorder "
             "position unmoved for max(factor x median step time, floor). Sessions with a flight "
             "recorder only.",
             false);
  MetricFamily position_age = Family(
      "tracetorchd_session_position_age_seconds",
      "Seconds since the daemon last saw the session's flight recorder position move.", false);
  MetricFamily layer_latency =
      Family("tracetorchd_layer_latency_seconds",
             "Mean forward latency of the session's slowest layers (--metrics-layers).", false);
  MetricFamily layer_grad =
      Family("tracetorchd_layer_grad_norm", "Latest output-gradient norm of those layers.", false);

  const std::vector<int64_t> diverging = DivergenceCounts(sessions);
  for (size_t i = 0; i < sessions.size(); ++i) {
    const SessionSample& s = sessions[i];
    const std::vector<ClientMetric::Label> labels = SessionLabels(s.info);
    Add(steps, labels, static_cast<double>(ForwardPasses(s.record)));
    Add(events, labels, static_cast<double>(s.info.events()));
    Add(dropped, labels, static_cast<double>(s.info.dropped_events()));
    std::map<std::pair<std::string, std::string>, int64_t> by_kind;
    for (const Anomaly& a : s.record.warnings) {
      ++by_kind[{std::string(TypeName(a)), std::string(ToString(a.severity))}];
    }
    for (const auto& [kind, n] : by_kind) {
      Add(anomalies, With(labels, {{"type", kind.first}, {"severity", kind.second}}),
          static_cast<double>(n));
    }
    Add(nan_origin, labels, s.record.metadata.nan_origin.has_value() ? 1 : 0);
    if (const LayerTrace* outer = Outermost(s.record); outer != nullptr) {
      Add(step_time, labels, *outer->latency_ms / 1e3);
    }
    if (s.newest_event != absl::InfinitePast()) {
      Add(newest, labels, absl::ToDoubleSeconds(s.newest_event - absl::UnixEpoch()));
    }
    Add(divergence, labels, static_cast<double>(diverging[i]));
    if (const v1::FlightStatus& f = s.info.flight(); f.recorder()) {
      Add(stalled, labels, f.stalled() ? 1 : 0);
      if (f.moved_unix_ns() > 0) {
        Add(position_age, labels,
            std::max(0.0,
                     absl::ToDoubleSeconds(s.scraped - absl::FromUnixNanos(f.moved_unix_ns()))));
      }
    }

    if (options.layers_per_session == 0) continue;
    std::vector<const LayerTrace*> timed;
    for (const LayerTrace& layer : s.record.layers) {
      if (layer.latency_ms_mean.has_value()) timed.push_back(&layer);
    }
    const size_t n = std::min(options.layers_per_session, timed.size());
    std::partial_sort(timed.begin(), timed.begin() + static_cast<std::ptrdiff_t>(n), timed.end(),
                      [](const LayerTrace* a, const LayerTrace* b) {
                        return *a->latency_ms_mean > *b->latency_ms_mean;
                      });
    for (size_t k = 0; k < n; ++k) {
      const LayerTrace& layer = *timed[k];
      const auto layer_labels = With(labels, {{"layer", layer.full_name}});
      Add(layer_latency, layer_labels, *layer.latency_ms_mean / 1e3);
      if (layer.grad_norm.has_value()) Add(layer_grad, layer_labels, *layer.grad_norm);
    }
  }

  std::vector<MetricFamily> out;
  for (MetricFamily* f : {&steps, &events, &dropped, &anomalies, &nan_origin, &step_time, &newest,
                          &divergence, &stalled, &position_age, &layer_latency, &layer_grad}) {
    if (!f->metric.empty()) out.push_back(std::move(*f));
  }
  return out;
}

DaemonMetrics::DaemonMetrics(std::function<v1::DaemonStats()> stats, const SessionManager* sessions,
                             MetricsOptions options)
    : stats_(std::move(stats)), sessions_(sessions), options_(options) {}

std::vector<SessionSample> DaemonMetrics::LiveSessions() const {
  std::vector<SessionSample> out;
  for (const protocol::SessionInfo& info : sessions_->List()) {
    if (info.state != protocol::SessionState::kLive) continue;
    absl::StatusOr<SessionManager::Found> found = sessions_->Find(info.session_id);
    // Ended and evicted meanwhile: no longer live, so not exported.
    if (!found.ok() || found->session == nullptr) continue;
    SessionSample s;
    s.record = found->session->Record();
    s.newest_event = found->session->newest_event();
    protocol::ToProto(found->session->Info(), &s.info);
    s.scraped = absl::Now();
    if (s.info.state() != v1::SESSION_STATE_LIVE) continue;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<MetricFamily> DaemonMetrics::Collect() const {
  std::vector<MetricFamily> out;
  try {
    out = StatsFamilies(stats_());
    std::vector<MetricFamily> sessions = SessionFamilies(LiveSessions(), options_);
    out.insert(out.end(), std::make_move_iterator(sessions.begin()),
               std::make_move_iterator(sessions.end()));
  } catch (const std::exception& e) {
    spdlog::error("metrics scrape failed: {}", e.what());
  } catch (...) {
    spdlog::error("metrics scrape failed: unknown exception");
  }
  return out;
}

}  // namespace tracetorch::daemon
