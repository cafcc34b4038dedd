// `tracetorch audit FILE [--json]`: the health report of an op graph's capture from the graph
// alone (trace/op_audit.h): the non-finite origin with its module, the dead activations. FILE is
// an op graph (trace.export) or a training trace with an "op_graph" member. The replay checks need
// the tensors and the model: `trace.audit(model)` in Python; this command says so.
//
// Exit codes as commands.h: 0 when the report was printed, whatever it found; 2 for an unreadable
// file.
//
// Thread-compatible.
#ifndef TRACETORCH_CLI_AUDIT_COMMAND_H_
#define TRACETORCH_CLI_AUDIT_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "cli/commands.h"

namespace tracetorch::cli {

class AuditCommand {
 public:
  // Adds the `audit` subcommand to `app`.
  explicit AuditCommand(CLI::App* app);

  bool parsed() const { return audit_->parsed(); }
  int Run(const view::CliEnvironment& env) const;

 private:
  CLI::App* audit_ = nullptr;
  std::string file_;
  bool json_ = false;
};

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_AUDIT_COMMAND_H_
