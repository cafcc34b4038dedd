#include "cli/forensics_view.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/session_labels.h"
#include "view/labels.h"
#include "view/live_view.h"

namespace tracetorch::cli {

using ::tracetorch::view::Color;
using ::tracetorch::view::FormatUnixTime;
using ::tracetorch::view::Glyph;
using ::tracetorch::view::Paint;
using ::tracetorch::view::Panel;
using ::tracetorch::view::RenderPanel;
using ::tracetorch::view::RenderTable;
using ::tracetorch::view::Sanitize;
using ::tracetorch::view::Sparkline;
using ::tracetorch::view::Style;
using ::tracetorch::view::Table;
namespace {

// A time of day with milliseconds, UTC: "12:01:02.345".
std::string ClockTime(int64_t unix_ns) {
  if (unix_ns <= 0) return "-";
  const std::string date = FormatUnixTime(unix_ns);  // "2026-01-01T12:00:00Z"
  const size_t t = date.find('T');
  const std::string hms = t == std::string::npos ? date : date.substr(t + 1, 8);
  return absl::StrFormat("%s.%03d", hms, static_cast<int>((unix_ns / 1000000) % 1000));
}

// Per layer and step: the ring's forward and backward time (ms, summed over the step's calls).
struct StepTimes {
  double forward_ms = NAN;
  double backward_ms = NAN;
  bool non_finite = false;
};
using RingTable = absl::flat_hash_map<std::string, std::map<uint64_t, StepTimes>>;

RingTable TimesByLayer(const v1::ForensicBundle& b, std::vector<uint64_t>* steps) {
  RingTable out;
  std::vector<uint64_t> seen;
  for (const v1::ForensicSpan& s : b.spans()) {
    StepTimes& t = out[s.layer()][s.step()];
    double& slot = s.backward() ? t.backward_ms : t.forward_ms;
    slot = (std::isnan(slot) ? 0.0 : slot) + static_cast<double>(s.duration_ns()) / 1e6;
    t.non_finite |= s.non_finite();
    seen.push_back(s.step());
  }
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  *steps = std::move(seen);
  return out;
}

// "0.42 ▁▂▃▅" for `values` (the last is the number shown); "-" without a finite value.
std::string Cell(const std::vector<double>& values, const std::vector<bool>& non_finite,
                 size_t points, const ForensicsViewOptions& options, int precision = 2) {
  double last = NAN;
  for (double v : values) {
    if (std::isfinite(v)) last = v;
  }
  if (!std::isfinite(last)) return "-";
  return absl::StrCat(absl::StrFormat("%.*f", precision, last), " ",
                      Sparkline(values, non_finite, points, options.style));
}

std::string LayerTable(const v1::ForensicBundle& b, const ForensicsViewOptions& options) {
  const v1::Snapshot& snap = b.snapshot();
  const auto& layers = snap.record().layers();
  if (layers.empty()) return "";
  const std::string& at_name = snap.session().flight().layer();
  const std::string& origin = snap.record().metadata().nan_origin().layer();
  int at = -1;
  for (int i = 0; i < layers.size(); ++i) {
    if (layers[i].full_name() == at_name) at = i;
  }
  if (at < 0) {
    for (int i = 0; i < layers.size(); ++i) {
      if (!origin.empty() && layers[i].full_name() == origin) at = i;
    }
  }
  std::vector<uint64_t> steps;
  const RingTable ring = TimesByLayer(b, &steps);
  if (steps.size() > options.steps) steps.erase(steps.begin(), steps.end() - options.steps);
  absl::flat_hash_map<std::string, const v1::LayerHistory*> history;
  for (const v1::LayerHistory& h : snap.history()) history[h.full_name()] = &h;

  const int span = static_cast<int>(options.layers);
  const int first = at < 0 ? 0 : std::max(0, at - span);
  const int last =
      at < 0 ? std::min(layers.size() - 1, 2 * span) : std::min(layers.size() - 1, at + span);
  Table table;
  table.title =
      absl::StrCat("Layers around ", at_name.empty() ? std::string("the model") : Sanitize(at_name),
                   steps.empty() ? std::string(", no spans in the ring")
                                 : absl::StrCat(", steps ", steps.front(), "..", steps.back()));
  table.header = {"", "LAYER", "FWD ms", "BWD ms", "OUT STD", "GRAD NORM"};
  for (int i = first; i <= last; ++i) {
    const std::string& name = layers[i].full_name();
    std::vector<double> fwd, bwd;
    std::vector<bool> bad;
    auto it = ring.find(name);
    for (uint64_t s : steps) {
      StepTimes t;
      if (it != ring.end()) {
        if (auto found = it->second.find(s); found != it->second.end()) t = found->second;
      }
      fwd.push_back(t.forward_ms);
      bwd.push_back(t.backward_ms);
      bad.push_back(t.non_finite);
    }
    std::vector<double> out_std, grad;
    std::vector<bool> hist_bad;
    if (auto h = history.find(name); h != history.end()) {
      out_std.assign(h->second->output_std().begin(), h->second->output_std().end());
      grad.assign(h->second->grad_norm().begin(), h->second->grad_norm().end());
      hist_bad.assign(h->second->non_finite().begin(), h->second->non_finite().end());
    }
    std::string mark = i == at ? std::string(Glyph(options.style, "▶", ">")) : "";
    if (name == origin) mark = Paint("!", Color::kRed, options.style);
    table.rows.push_back({mark, Sanitize(name), Cell(fwd, bad, options.steps, options),
                          Cell(bwd, bad, options.steps, options),
                          Cell(out_std, hist_bad, options.steps, options, 3),
                          Cell(grad, hist_bad, options.steps, options, 3)});
  }
  return RenderTable(table, options.style);
}

std::string NonFiniteFirst(const v1::ForensicBundle& b) {
  std::string out;
  const v1::TraceMetadata& m = b.snapshot().record().metadata();
  if (m.has_nan_origin()) {
    const v1::NanOrigin& o = m.nan_origin();
    out = absl::StrCat(Sanitize(o.layer()), " at step ", o.step(), o.is_nan() ? " (NaN)" : " (Inf)",
                       o.op().empty() ? "" : absl::StrCat(", op ", Sanitize(o.op())));
  }
  for (const v1::ForensicSpan& s : b.spans()) {
    if (!s.non_finite()) continue;
    absl::StrAppend(&out, out.empty() ? "" : "; ", "the ring's first: ", Sanitize(s.layer()), " ",
                    s.backward() ? "backward" : "forward", " at step ", s.step());
    break;
  }
  return out;
}

}  // namespace

std::string RenderBundle(const v1::ForensicBundle& b, const ForensicsViewOptions& options) {
  const Style& style = options.style;
  const v1::SessionInfo& info = b.snapshot().session();
  const v1::FlightStatus& f = info.flight();
  Panel panel;
  panel.title = absl::StrCat(b.reason(), " ", FormatUnixTime(b.written_unix_ns()));
  panel.rows.push_back({"State", SessionStateName(info)});
  if (f.has_exit() && !f.exit().description().empty()) {
    panel.rows.push_back({"Exit", Sanitize(f.exit().description())});
  }
  if (!f.position().empty()) {
    std::string where = Sanitize(f.position());
    if (f.since_unix_ns() > 0) absl::StrAppend(&where, " since ", ClockTime(f.since_unix_ns()));
    panel.rows.push_back({"Position", where});
  } else if (!f.recorder()) {
    panel.rows.push_back({"Position", "unknown (the agent passed no flight recorder)"});
  }
  if (f.stalled()) {
    panel.rows.push_back(
        {"Stalled", absl::StrFormat("since %s (unmoved for %.1f s, the threshold)",
                                    ClockTime(f.stalled_since_unix_ns()), f.stall_threshold_s())});
  }
  if (f.median_step_s() > 0) {
    panel.rows.push_back({"Median step", absl::StrFormat("%.1f ms", f.median_step_s() * 1e3)});
  }
  if (const std::string first = NonFiniteFirst(b); !first.empty()) {
    panel.rows.push_back({"Non-finite first", first});
  }
  panel.rows.push_back(
      {"Ring",
       absl::StrCat(b.spans_size(), " spans (", b.spans_written(), " written",
                    b.torn_spans() > 0 ? absl::StrCat(", ", b.torn_spans(), " torn") : "", ")")});
  std::string out = RenderPanel(panel, style);
  absl::StrAppend(&out, LayerTable(b, options));
  for (const v1::ThreadStacks& t : b.stacks()) {
    if (!t.error().empty()) {
      absl::StrAppend(&out, "Stacks (", Sanitize(t.tool()), "): ", Sanitize(t.error()), "\n");
      continue;
    }
    absl::StrAppend(&out, "Stacks (", Sanitize(t.tool()), " at ", ClockTime(t.taken_unix_ns()),
                    "):\n");
    const std::vector<std::string> lines = absl::StrSplit(t.text(), '\n');
    size_t shown = 0;
    for (const std::string& line : lines) {
      if (shown == options.stack_lines) {
        absl::StrAppend(&out, "  ... ", lines.size() - shown,
                        " more lines (--json has them all)\n");
        break;
      }
      if (line.empty()) continue;
      absl::StrAppend(&out, "  ", Sanitize(line), "\n");
      ++shown;
    }
  }
  return out;
}

std::string RenderForensics(const v1::ForensicsResponse& r, const ForensicsViewOptions& options) {
  std::string out = absl::StrCat(
      Paint(absl::StrCat("Session ", Sanitize(r.session_id())), Color::kBold, options.style), "\n");
  if (r.bundles().empty()) {
    absl::StrAppend(&out,
                    "no forensic bundles (the session ended cleanly, or has not stalled, died or "
                    "seen a NaN/Inf yet; --now takes one from a live session)\n");
    return out;
  }
  const v1::SessionInfo& info = r.bundles(r.bundles_size() - 1).snapshot().session();
  const v1::ProcessIdentity& id = info.identity();
  absl::StrAppend(&out, "pid ", id.pid(), id.host().empty() ? "" : " on ", Sanitize(id.host()),
                  id.has_rank() ? absl::StrCat(", rank ", id.rank()) : "",
                  id.model_name().empty() ? "" : absl::StrCat(", ", Sanitize(id.model_name())),
                  "\n", r.bundles_size(), " bundle", r.bundles_size() == 1 ? "" : "s", ":");
  for (const v1::ForensicBundle& b : r.bundles()) {
    absl::StrAppend(&out, " ", b.reason(), " (", FormatUnixTime(b.written_unix_ns()), ")");
  }
  absl::StrAppend(&out, "\n\n");
  for (const v1::ForensicBundle& b : r.bundles()) {
    absl::StrAppend(&out, RenderBundle(b, options), "\n");
  }
  return out;
}

}  // namespace tracetorch::cli
