#include "cli/audit_command.h"

#include <string>

#include "absl/status/statusor.h"
#include "trace/op_audit.h"
#include "trace/op_graph.h"
#include "trace/op_graph_json.h"
#include "view/command_io.h"
#include "view/source.h"

namespace tracetorch::cli {

using ::tracetorch::view::CliEnvironment;
using ::tracetorch::view::DescribeLoadError;
using ::tracetorch::view::Fail;
using ::tracetorch::view::kExitOk;
using ::tracetorch::view::PrintLine;

AuditCommand::AuditCommand(CLI::App* app) {
  audit_ = app->add_subcommand(
      "audit", "Check an op graph: non-finite origin, dead activations (replay: trace.audit)");
  audit_->add_option("file", file_, "Op graph file, or a trace file with an \"op_graph\" member")
      ->required();
  audit_->add_flag("--json", json_, "Print the report as JSON");
}

int AuditCommand::Run(const CliEnvironment& env) const {
  absl::StatusOr<OpGraph> graph = ReadOpGraphFile(file_);
  if (!graph.ok()) return Fail(env, DescribeLoadError(file_, graph.status()));
  const OpAuditReport report = AuditOpGraph(*graph);
  if (json_) {
    PrintLine(OpAuditToJson(report), env);
    return kExitOk;
  }
  *env.out << RenderOpAudit(report)
           << "  replay             needs the tensors and the model: trace.audit(model) in "
              "Python\n";
  env.out->flush();
  return kExitOk;
}

}  // namespace tracetorch::cli
