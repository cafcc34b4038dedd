// `tracetorch ops FILE [--func NAME]... [--in-module ADDR]... [--module ADDR]... [--label L]...
//                      [--select EXPR] [--json]`: the ops of an op graph (trace/op_graph_json.h,
// what `trace.export(...)` writes) as a table, filtered with the core's selectors
// (trace/op_select.h). Repeated options of one kind are alternatives (--func conv2d --func
// linear: either); different kinds must all hold; --select takes a whole expression in the
// printed form ("func('conv2d') & ~in_module('layer2')") and is combined with the others by &.
//
// Table columns: Op (label), Function (the dispatcher's name), Module (address of the innermost
// pass), Shape, Params, Time (ms), Parents. --json prints {"file", "selector", "count", "ops": [op
// objects as in the file]}. Exit codes as commands.h: 2 for an unreadable file or a selector that
// does not parse.
//
// Thread-compatible.
#ifndef TRACETORCH_CLI_OPS_COMMAND_H_
#define TRACETORCH_CLI_OPS_COMMAND_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "view/text.h"

namespace tracetorch::cli {

class OpsCommand {
 public:
  // Adds the `ops` subcommand to `app`.
  explicit OpsCommand(CLI::App* app);

  bool parsed() const { return ops_->parsed(); }
  int Run(const view::Style& style, const view::CliEnvironment& env) const;

 private:
  CLI::App* ops_ = nullptr;
  std::string file_;
  std::vector<std::string> funcs_;
  std::vector<std::string> in_modules_;
  std::vector<std::string> modules_;
  std::vector<std::string> labels_;
  std::string select_;
  bool json_ = false;
};

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_OPS_COMMAND_H_
