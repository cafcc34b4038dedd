// `tracetorch diff --remote` and `tracetorch baseline`: the CI diff service of a running
// tracetorchd (service.proto: Diff, SetBaseline, ListBaselines, RemoveBaseline).
//
//   tracetorch diff --remote [ADDR] A B [--json] [--latency-threshold X ...]
//   tracetorch baseline set NAME SOURCE [--remote ADDR]
//   tracetorch baseline list [--json] [--remote ADDR]
//   tracetorch baseline rm NAME [--remote ADDR]
//
// An operand (A, B, SOURCE) is one of
//   session:ID       a session of the daemon (ID may be "latest"); its per-step history makes the
//                    latency comparison noise-aware (trace/diff.h)
//   latest           the most recently started session
//   baseline:NAME    a named baseline kept by the daemon
//   PATH             an existing trace file: read here and uploaded (no history). A path that
//                    contains '/' or ends in ".json" is always a file ("./latest" is the file).
//   anything else    a session id
// ADDR is optional for `diff --remote` (default: protocol::DefaultServiceAddress()): `diff --remote
// A B` uses the default, `diff --remote ADDR A B` (or --remote=ADDR, or --remote ADDR after A B)
// the given one. Calls use service_client::ServiceClientOptionsFromEnv() (token, TLS).
//
// Output and exit codes are those of the local `diff` (ReportDiff): the same table or --json
// document, 0 no regression, 1 a warning or critical entry, 2 an error in one line on stderr
// (unknown session or baseline, unreadable file, unreachable daemon, bad threshold).
//
// Thread-compatible; used by GrpcDaemonCommands (remote_commands.h).
#ifndef TRACETORCH_CLI_REMOTE_DIFF_H_
#define TRACETORCH_CLI_REMOTE_DIFF_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cli/commands.h"
#include "cli/daemon_commands.h"
#include "tracetorch/v1/service.pb.h"
#include "view/text.h"

namespace tracetorch::cli {

// Parses an operand (see above) into a DiffOperand, reading and parsing a trace file when it is
// one. Errors: InvalidArgument for an empty operand or "session:" / "baseline:" without a name;
// the file's load error (view/source.h DescribeLoadError text) for an unreadable file.
absl::StatusOr<v1::DiffOperand> ParseRemoteOperand(absl::string_view spelling);

// `diff --remote`: the daemon's diff of the two operands, printed as the local diff prints it.
int RunRemoteDiff(const RemoteDiffRequest& request, const view::Style& style,
                  const view::CliEnvironment& env);

// `baseline set|list|rm`.
int RunBaseline(const BaselineRequest& request, const view::CliEnvironment& env);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_REMOTE_DIFF_H_
