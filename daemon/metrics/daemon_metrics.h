// tracetorchd's Prometheus series, built at scrape time from what the daemon already keeps: the
// GetStats counters (v1::DaemonStats) and the live sessions of a SessionManager. Nothing is
// counted twice; a scrape reads a snapshot. The names and labels are listed in deploy/METRICS.md.
//
// Cardinality: the daemon-wide series are fixed (one per DaemonStats field). Each live session
// adds kSeriesPerSession series, one per anomaly (type, severity) pair present in it (at most
// the number of anomaly types, as each type has one severity), and 2 x layers_per_session
// per-layer series. Live sessions are bounded by --max-live-sessions; ended sessions have none.
//
// Depends on daemon/core only (no gRPC, no HTTP): daemon/metrics/metrics_server.h serves it.
#ifndef TRACETORCH_DAEMON_METRICS_DAEMON_METRICS_H_
#define TRACETORCH_DAEMON_METRICS_DAEMON_METRICS_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/core/session_manager.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "trace/record.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {

struct MetricsOptions {
  // Per-layer series (mean forward latency, gradient norm) for this many of each live session's
  // slowest layers (by mean forward latency); 0: none.
  size_t layers_per_session = 0;
};

// Series every live session has whatever its anomalies: steps, events, dropped events, the NaN
// origin flag, the latest step time, the newest event's time and the rank divergence count; with
// a flight recorder also whether it is stalled and its position's age.
inline constexpr size_t kSeriesPerSession = 9;

// One live session as a scrape sees it.
struct SessionSample {
  v1::SessionInfo info;
  TraceRecord record;
  absl::Time newest_event = absl::InfinitePast();  // InfinitePast: no event yet.
  absl::Time scraped = absl::InfinitePast();       // When it was read (position ages).
};

// The prometheus name, type and help of each DaemonStats field, in field order. Every field of
// DaemonStats has one entry (daemon_metrics_test checks it against the descriptor).
struct StatsSeries {
  const char* field;  // DaemonStats field name.
  const char* name;   // Prometheus series name.
  bool counter;       // false: gauge.
  const char* help;
};
const std::vector<StatsSeries>& StatsSeriesTable();

// The daemon-wide families, one per StatsSeriesTable() entry.
std::vector<prometheus::MetricFamily> StatsFamilies(const v1::DaemonStats& stats);

// The per-session (and, with options.layers_per_session, per-layer) families. Rank divergence is
// computed per job over the given sessions with DetectRankDivergence (trace/divergence.h), the
// same core code as the daemon's job view. Families without samples are left out.
std::vector<prometheus::MetricFamily> SessionFamilies(const std::vector<SessionSample>& sessions,
                                                      const MetricsOptions& options);

// The Collectable a prometheus::Exposer scrapes. `stats` gives the GetStats counters (the
// Daemon's Stats()); `sessions` must outlive this object. Collect() is thread-safe (it reads
// only thread-safe sources) and never throws: a failure is logged and yields the families
// built so far.
class DaemonMetrics : public prometheus::Collectable {
 public:
  DaemonMetrics(std::function<v1::DaemonStats()> stats, const SessionManager* sessions,
                MetricsOptions options);

  std::vector<prometheus::MetricFamily> Collect() const override;

  // The live sessions now (their records copied), oldest first.
  std::vector<SessionSample> LiveSessions() const;

 private:
  const std::function<v1::DaemonStats()> stats_;
  const SessionManager* const sessions_;
  const MetricsOptions options_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_METRICS_DAEMON_METRICS_H_
