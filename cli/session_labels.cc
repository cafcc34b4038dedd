#include "cli/session_labels.h"

#include <string>

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

}  // namespace tracetorch::cli
