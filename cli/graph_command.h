// `tracetorch graph FILE [-o OUT] [--collapse none|max|auto] [--module ADDR] [--format
//                        svg|png|pdf|dot] [--direction TB|LR]`: a picture of an op graph
// (draw/op_graph_dot.h), laid out by Graphviz's libraries in this process. FILE is an op graph
// (trace.export) or a training trace whose "op_graph" member holds one (the step an ops="on_nan"
// capture kept). The format comes from --format, else from OUT's extension, else svg; without
// -o an svg or dot picture is printed on stdout, and png/pdf need -o.
//
// Exit codes as commands.h: 2 for an unreadable file, an unknown option value or module, a
// binary format without -o, or a failure to write OUT.
//
// Thread-compatible (the drawing itself is serialised inside draw/).
#ifndef TRACETORCH_CLI_GRAPH_COMMAND_H_
#define TRACETORCH_CLI_GRAPH_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "cli/commands.h"

namespace tracetorch::cli {

class GraphCommand {
 public:
  // Adds the `graph` subcommand to `app`.
  explicit GraphCommand(CLI::App* app);

  bool parsed() const { return graph_->parsed(); }
  int Run(const view::CliEnvironment& env) const;

 private:
  CLI::App* graph_ = nullptr;
  std::string file_;
  std::string output_;
  std::string collapse_ = "auto";
  std::string module_;
  std::string format_;
  std::string direction_ = "TB";
};

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_GRAPH_COMMAND_H_
