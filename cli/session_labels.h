// The name of a tracetorchd session state, as `sessions` and `watch --remote` (text and JSON)
// print it. Apart from labels.h because it takes the protocol's enum: only the daemon subcommands
// (library tracetorch_cli_lib) include it.
//
// Thread-compatible; pure functions.
#ifndef TRACETORCH_CLI_SESSION_LABELS_H_
#define TRACETORCH_CLI_SESSION_LABELS_H_

#include <string>

#include "tracetorch/v1/service.pb.h"

namespace tracetorch::cli {

// "live", "finished" or "aborted"; "unknown" for anything else (SESSION_STATE_UNSPECIFIED, a state
// added to the protocol after this build).
std::string SessionStateName(v1::SessionState state);
// The same for a session, "stalled" for a live one whose flight status says so.
std::string SessionStateName(const v1::SessionInfo& info);

// Where the session's process is, from its flight recorder: "step 12, backward, in encoder.l5",
// with ", for 43 s" (since it last moved, as of `now_unix_ns`) while stalled; the exit of an
// aborted session ("killed by SIGSEGV") after it. Empty without a flight status.
std::string FlightText(const v1::SessionInfo& info, int64_t now_unix_ns);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_SESSION_LABELS_H_
