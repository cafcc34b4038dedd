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
// Thread-compatible; used from RunTracetorch (commands.cc).
#ifndef TRACETORCH_CLI_REMOTE_DIFF_H_
#define TRACETORCH_CLI_REMOTE_DIFF_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cli/commands.h"
#include "cli/text.h"
#include "trace/diff.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::cli {

// Prints `diff` as `tracetorch diff` does (RenderDiff, or DiffToJson with `json`) and returns
// kExitRegressions when it has a warning or critical entry, else kExitOk. Shared by the local and
// the remote diff.
int ReportDiff(const TraceDiff& diff, bool json, const Style& style, const CliEnvironment& env);

// Parses an operand (see above) into a DiffOperand, reading and parsing a trace file when it is
// one. Errors: InvalidArgument for an empty operand or "session:" / "baseline:" without a name;
// the file's load error (cli/source.h DescribeLoadError text) for an unreadable file.
absl::StatusOr<v1::DiffOperand> ParseRemoteOperand(absl::string_view spelling);

// `--remote [ADDR]` on the existing `diff` subcommand.
class RemoteDiffCommand {
 public:
  // Adds --remote to `diff`, whose positionals are named "baseline" and "current" (current not
  // required: `diff --remote A B` leaves it empty).
  explicit RemoteDiffCommand(CLI::App* diff);

  // --remote was given.
  bool requested() const;

  // Runs the remote diff of the positionals `baseline` and `current` as parsed (re-assigned when
  // --remote took one of them as its address).
  int Run(const std::string& baseline, const std::string& current, const DiffThresholds& thresholds,
          bool json, const Style& style, const CliEnvironment& env) const;

 private:
  CLI::App* const diff_;
  CLI::Option* remote_ = nullptr;
  std::string address_;
};

// `baseline set|list|rm`.
class BaselineCommand {
 public:
  explicit BaselineCommand(CLI::App* app);

  bool parsed() const;
  int Run(const CliEnvironment& env) const;

 private:
  CLI::App* baseline_ = nullptr;
  CLI::App* set_ = nullptr;
  CLI::App* list_ = nullptr;
  CLI::App* rm_ = nullptr;
  std::string name_;
  std::string source_;
  std::string remote_;
  bool json_ = false;
};

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_REMOTE_DIFF_H_
