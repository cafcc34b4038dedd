// The live terminal view shared by `tracetorch watch FILE` and `tracetorch watch --remote`: the
// model summary, the anomalies with the NaN origin first, the layer tree nested by name with each
// layer's mean latency, output std and gradient norm (and, when per-step history is known, a
// sparkline of each), and for a remote watch a connection status line and the session's event and
// drop counters. A job (several ranks) is shown side by side per layer, divergent cells flagged.
//
// The view takes plain data (trace/record.h and the small structs below), not wire types: the
// remote driver (remote_watch.h) converts what the daemon sends. Every function returns the whole
// text, ending with a newline, and writes nothing. Text read from a trace is Sanitize()d.
//
// Layer line (plain style, with history):
//   +-- fc (Linear)   lat 0.034ms _.-=+*#@  std 0.32 ___.--==  grad 0.2969 ..--==++ [ok]
// (rich style: Unicode tree guides, sparklines in ▁▂▃▄▅▆▇█, ✓/⚠/✗ marks, colour).
//
// Thread-compatible; no shared state.
#ifndef TRACETORCH_VIEW_LIVE_VIEW_H_
#define TRACETORCH_VIEW_LIVE_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "trace/record.h"
#include "view/filter.h"
#include "view/text.h"

namespace tracetorch::view {

// One layer's recent per-step values, oldest first. NaN: unknown in that step. `non_finite[i]`:
// the layer's output or gradient held NaN/Inf in step i (shorter vectors read as false).
struct LayerSeries {
  std::vector<double> latency_ms;
  std::vector<double> output_std;
  std::vector<double> grad_norm;
  std::vector<bool> non_finite;
};
// By LayerTrace::full_name.
using LayerHistoryMap = absl::flat_hash_map<std::string, LayerSeries>;

// What the view shows of a daemon session (service.proto SessionInfo).
struct SessionSummary {
  std::string session_id;
  std::string state = "unknown";  // SessionStateName (labels.h): "live", "finished", ...
  uint64_t events = 0;
  uint64_t dropped_events = 0;
  uint64_t rejected_events = 0;
  int64_t pid = 0;
  std::string host;
  std::optional<int> rank;
  std::string job_id;
  std::string position;  // FlightText (session_labels.h): where the process is; empty: unknown.
};

// The connection status line of a remote watch.
struct StatusLine {
  enum class Kind {
    kOk,       // "connected to ADDR" (green ●).
    kWaiting,  // "connecting to ADDR…", "daemon went away — reconnecting…" (yellow ⟳).
    kDone,     // "session finished" (blue ■).
    kProblem,  // "session aborted", an error (red ✗).
  };
  Kind kind = Kind::kOk;
  std::string text;
};

struct LiveViewOptions {
  Style style = Style::Plain();
  LayerFilter filter = {};
  // Terminal columns: every line is cut to this many display columns (an ellipsis marks the cut).
  // 0: unknown (a pipe), nothing is cut.
  size_t width = 0;
  // Sparkline length: the newest this many steps (fewer when `width` is too narrow for them).
  size_t spark_points = 12;
};

// A sparkline of `values` (the newest `points` of them), one column per value, scaled between
// their finite minimum and maximum: ▁▂▃▄▅▆▇█ in unicode style, "_.-=+*#@" otherwise. A NaN value
// is a space; a value at an index where `non_finite` is true is a red '!'. All-equal values sit
// at the middle level. Empty when `values` is empty.
std::string Sparkline(const std::vector<double>& values, const std::vector<bool>& non_finite,
                      size_t points, const Style& style);

// The anomalies in display order: those on the NaN origin's layer first (NaN/Inf activations
// before others), then the rest by severity (critical first), otherwise in record order.
std::vector<Anomaly> LiveAnomalyOrder(const TraceRecord& record);

// The body of a frame: the model panel (with "N (M shown)" under a filter), the anomalies (a "NaN
// origin: LAYER at step N" line, then the table in LiveAnomalyOrder), and last the layer tree with
// values and sparklines (`history` may be null: values only), so that a tree too tall for the
// terminal is what gets cut. Layers and anomalies are filtered by options.filter. Not truncated
// (see TruncateLines, text.h).
std::string RenderLiveBody(const TraceRecord& record, const LayerHistoryMap* history,
                           const LiveViewOptions& options);

// A whole remote frame.
struct LiveFrame {
  std::string target;  // What is watched: "session 20260101-…-17", "latest".
  std::string address;
  StatusLine status;
  std::optional<SessionSummary> session;  // The counters line, when known.
  uint64_t updates = 0;                   // Updates received so far.
  std::optional<absl::Time> updated_at;   // When the newest update arrived.
  const TraceRecord* record = nullptr;    // Null: nothing received yet.
  const LayerHistoryMap* history = nullptr;
};

// Title line, status line, counters line, a blank line, then RenderLiveBody (or "waiting for the
// first update…" without a record); every line cut to options.width.
std::string RenderLiveFrame(const LiveFrame& frame, const LiveViewOptions& options);

// One rank of a job.
struct RankView {
  int rank = 0;  // ProcessIdentity.rank, else the position in the job.
  SessionSummary session;
  TraceRecord record;
};

struct LiveJobFrame {
  std::string job_id;
  std::string address;
  StatusLine status;
  uint64_t updates = 0;
  std::optional<absl::Time> updated_at;
  std::vector<RankView> ranks;       // Ordered by rank.
  std::vector<Anomaly> divergences;  // kRankDivergence, details "rank" and "metric".
};

// The job view: title, status, one line per rank (pid, state, events, drops), the divergence
// anomalies, then a table with a row per layer (nested names; the union of the ranks' layers in the
// first rank's order, filtered by options.filter) and per rank a column "LATENCY / g GRAD_NORM";
// a cell named by a divergence (its rank and metric) is flagged (⚠ / "!") and so is its layer.
std::string RenderJobFrame(const LiveJobFrame& frame, const LiveViewOptions& options);

}  // namespace tracetorch::view

#endif  // TRACETORCH_VIEW_LIVE_VIEW_H_
