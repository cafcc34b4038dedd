// `tracetorch forensics`: a session's forensic bundles (forensics_view.h), or a job's view over its
// ranks (job_forensics.h), from one daemon or several (--remote A,B,...), or through one daemon's
// fleet store (its GetJob answers for every daemon registered there); optionally the flight
// recorder's ring as a Perfetto/Chrome trace (perfetto_export.h).
//
// Thread-compatible.
#ifndef TRACETORCH_CLI_FORENSICS_COMMAND_H_
#define TRACETORCH_CLI_FORENSICS_COMMAND_H_

#include "cli/commands.h"
#include "cli/daemon_commands.h"
#include "view/text.h"

namespace tracetorch::cli {

int RunForensics(const ForensicsRequest& request, const view::Style& style,
                 const view::CliEnvironment& env);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_FORENSICS_COMMAND_H_
