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

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_SESSION_LABELS_H_
