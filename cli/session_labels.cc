#include "cli/session_labels.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tracetorch::cli {

std::string SessionStateName(v1::SessionState state) {
  switch (state) {
    case v1::SESSION_STATE_LIVE:
      return "live";
    case v1::SESSION_STATE_FINISHED:
      return "finished";
    case v1::SESSION_STATE_ABORTED:
      return "aborted";
    default:
      return "unknown";
  }
}

std::string SessionStateName(const v1::SessionInfo& info) {
  if (info.state() == v1::SESSION_STATE_LIVE && info.flight().stalled()) return "stalled";
  return SessionStateName(info.state());
}

std::string FlightText(const v1::SessionInfo& info, int64_t now_unix_ns) {
  const v1::FlightStatus& f = info.flight();
  std::string out = f.position();
  if (f.stalled() && f.moved_unix_ns() > 0 && now_unix_ns > f.moved_unix_ns()) {
    absl::StrAppendFormat(&out, ", for %.0f s",
                          static_cast<double>(now_unix_ns - f.moved_unix_ns()) / 1e9);
  }
  if (f.has_exit() && !f.exit().description().empty()) {
    absl::StrAppend(&out, out.empty() ? "" : "; ", f.exit().description());
  }
  return out;
}

}  // namespace tracetorch::cli
