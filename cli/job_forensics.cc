#include "cli/job_forensics.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/session_labels.h"
#include "view/labels.h"

namespace tracetorch::cli {

using ::tracetorch::view::Color;
using ::tracetorch::view::FormatUnixTime;
using ::tracetorch::view::GlyphString;
using ::tracetorch::view::Paint;
using ::tracetorch::view::RenderTable;
using ::tracetorch::view::Sanitize;
using ::tracetorch::view::Style;
using ::tracetorch::view::Table;
namespace {

bool Stopped(const v1::JobRank& r) {
  const v1::SessionInfo& s = r.session();
  return (s.state() == v1::SESSION_STATE_LIVE && s.flight().stalled()) ||
         s.state() == v1::SESSION_STATE_ABORTED;
}

// When the rank stopped moving: its position's own time, else the daemon's view, else its end.
int64_t StoppedAt(const v1::JobRank& r) {
  const v1::SessionInfo& s = r.session();
  if (s.flight().since_unix_ns() > 0) return s.flight().since_unix_ns();
  if (s.flight().moved_unix_ns() > 0) return s.flight().moved_unix_ns();
  return s.ended_unix_ns();
}

std::string RankName(const v1::JobRank& r) {
  const v1::ProcessIdentity& id = r.session().identity();
  return id.has_rank() ? absl::StrCat("rank ", id.rank()) : absl::StrCat("pid ", id.pid());
}

}  // namespace

std::vector<v1::JobRank> LatestPerRank(std::vector<v1::JobRank> ranks) {
  std::map<int32_t, v1::JobRank> by_rank;
  std::vector<v1::JobRank> unranked;
  for (v1::JobRank& r : ranks) {
    const v1::ProcessIdentity& id = r.session().identity();
    if (!id.has_rank()) {
      unranked.push_back(std::move(r));
      continue;
    }
    auto [it, inserted] = by_rank.try_emplace(id.rank(), r);
    if (!inserted && r.session().started_unix_ns() > it->second.session().started_unix_ns()) {
      it->second = std::move(r);
    }
  }
  std::vector<v1::JobRank> out;
  for (auto& [rank, r] : by_rank) out.push_back(std::move(r));
  for (v1::JobRank& r : unranked) out.push_back(std::move(r));
  return out;
}

JobFindings AnalyzeJob(const std::vector<v1::JobRank>& ranks) {
  JobFindings f;
  std::vector<size_t> stopped;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (Stopped(ranks[i])) stopped.push_back(i);
  }
  std::stable_sort(stopped.begin(), stopped.end(),
                   [&](size_t a, size_t b) { return StoppedAt(ranks[a]) < StoppedAt(ranks[b]); });
  if (!stopped.empty()) {
    f.first_stopped = stopped.front();
    f.stopped_after.assign(stopped.begin() + 1, stopped.end());
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    const v1::FlightStatus& fl = ranks[i].session().flight();
    if (fl.nan_found_unix_ns() <= 0) continue;
    if (!f.first_nan.has_value()) {
      f.first_nan = i;
      continue;
    }
    const v1::FlightStatus& best = ranks[*f.first_nan].session().flight();
    if (fl.nan_origin().step() < best.nan_origin().step() ||
        (fl.nan_origin().step() == best.nan_origin().step() &&
         fl.nan_found_unix_ns() < best.nan_found_unix_ns())) {
      f.first_nan = i;
    }
  }
  return f;
}

std::string RenderJobForensics(const std::string& job_id, const std::vector<v1::JobRank>& ranks,
                               const JobFindings& findings, const Style& style,
                               int64_t now_unix_ns) {
  std::string out = absl::StrCat(Paint(absl::StrCat("Job ", Sanitize(job_id)), Color::kBold, style),
                                 " · ", ranks.size(), " rank", ranks.size() == 1 ? "" : "s", "\n");
  Table table;
  table.header = {"RANK", "DAEMON", "SESSION", "STATE", "WHERE"};
  for (size_t i = 0; i < ranks.size(); ++i) {
    const v1::JobRank& r = ranks[i];
    std::string state = SessionStateName(r.session());
    if (state == "stalled" || state == "aborted") state = Paint(state, Color::kRed, style);
    std::string mark = findings.first_stopped == i
                           ? absl::StrCat(" ", GlyphString(style, "◀ first", "<- first"))
                           : "";
    table.rows.push_back({RankName(r), Sanitize(r.daemon().empty() ? "-" : r.daemon()),
                          Sanitize(r.session().session_id()), state,
                          absl::StrCat(Sanitize(FlightText(r.session(), now_unix_ns)), mark)});
  }
  absl::StrAppend(&out, RenderTable(table, style));
  if (findings.first_stopped.has_value()) {
    const v1::JobRank& first = ranks[*findings.first_stopped];
    absl::StrAppend(&out, "Stopped first: ", RankName(first), ", ",
                    Sanitize(first.session().flight().position()), " at ",
                    FormatUnixTime(StoppedAt(first)));
    if (!findings.stopped_after.empty()) {
      absl::StrAppend(&out, "; then");
      for (size_t i : findings.stopped_after) {
        absl::StrAppendFormat(&out, " %s (+%.3f s)", RankName(ranks[i]),
                              static_cast<double>(StoppedAt(ranks[i]) - StoppedAt(first)) / 1e9);
      }
      absl::StrAppend(&out, ", waiting behind it");
    }
    absl::StrAppend(&out, "\n");
  } else {
    absl::StrAppend(&out, "No rank has stopped.\n");
  }
  if (findings.first_nan.has_value()) {
    const v1::JobRank& r = ranks[*findings.first_nan];
    const v1::NanOrigin& o = r.session().flight().nan_origin();
    absl::StrAppend(&out, "NaN/Inf first: ", RankName(r), ", ", Sanitize(o.layer()), " at step ",
                    o.step(), o.op().empty() ? "" : absl::StrCat(" (op ", Sanitize(o.op()), ")"),
                    "\n");
  }
  return out;
}

}  // namespace tracetorch::cli
