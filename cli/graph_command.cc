#include "cli/graph_command.h"

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "draw/op_graph_dot.h"
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

GraphCommand::GraphCommand(CLI::App* app) {
  graph_ = app->add_subcommand("graph", "Draw an op graph (trace.export) with Graphviz");
  graph_->add_option("file", file_, "Op graph file, or a trace file with an \"op_graph\" member")
      ->required();
  graph_->add_option("-o,--output", output_,
                     "Write the picture to FILE (atomically); its extension gives the format");
  graph_->add_option("--collapse", collapse_,
                     "none (every op), max (one box per top-level module), auto (default: "
                     "<= ~80 nodes, repeated blocks folded)");
  graph_->add_option("--module", module_, "Draw only this module pass (layer2, block:2)");
  graph_->add_option("--format", format_, "svg, png, pdf or dot (default: from -o, else svg)");
  graph_->add_option("--direction", direction_, "TB (top to bottom, default) or LR");
}

int GraphCommand::Run(const CliEnvironment& env) const {
  draw::DrawOptions options;
  absl::StatusOr<draw::Collapse> collapse = draw::ParseCollapse(collapse_);
  if (!collapse.ok()) return Fail(env, absl::StrCat("--", collapse.status().message()));
  options.view.collapse = *collapse;
  options.view.module = module_;
  absl::StatusOr<draw::Direction> direction = draw::ParseDirection(direction_);
  if (!direction.ok()) return Fail(env, absl::StrCat("--", direction.status().message()));
  options.direction = *direction;
  absl::StatusOr<draw::DrawFormat> format = draw::ResolveDrawFormat(format_, output_);
  if (!format.ok()) {
    return Fail(env, format_.empty() ? absl::StrCat(format.status().message(), " (--format)")
                                     : absl::StrCat("--", format.status().message()));
  }
  options.format = *format;
  if (draw::IsBinaryFormat(options.format) && output_.empty()) {
    return Fail(env, "png and pdf pictures are binary: write them to a file with -o");
  }
  absl::StatusOr<OpGraph> graph = ReadOpGraphFile(file_);
  if (!graph.ok()) return Fail(env, DescribeLoadError(file_, graph.status()));
  if (output_.empty()) {
    absl::StatusOr<std::string> text = draw::DrawOpGraph(*graph, options);
    if (!text.ok()) return Fail(env, std::string(text.status().message()));
    PrintLine(*std::move(text), env);
    return kExitOk;
  }
  if (absl::Status s = draw::DrawOpGraphToFile(*graph, options, output_); !s.ok()) {
    return Fail(env, absl::StrCat(output_, ": ", s.message()));
  }
  return kExitOk;
}

}  // namespace tracetorch::cli
