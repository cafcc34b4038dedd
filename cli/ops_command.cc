#include "cli/ops_command.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "trace/json_writer.h"
#include "trace/op_graph.h"
#include "trace/op_graph_json.h"
#include "trace/op_select.h"
#include "view/command_io.h"
#include "view/source.h"

namespace tracetorch::cli {

using ::tracetorch::view::CliEnvironment;
using ::tracetorch::view::DescribeLoadError;
using ::tracetorch::view::Fail;
using ::tracetorch::view::kExitOk;
using ::tracetorch::view::PrintLine;
using ::tracetorch::view::RenderTable;
using ::tracetorch::view::Sanitize;
using ::tracetorch::view::Style;
using ::tracetorch::view::Table;
namespace {

// The alternatives of one option kind, OR-ed; nullopt when the option was not given.
std::optional<OpSelector> AnyOf(const std::vector<std::string>& values,
                                OpSelector (*make)(std::string_view)) {
  std::optional<OpSelector> out;
  for (const std::string& v : values) {
    OpSelector s = make(v);
    out = out ? (*out | s) : s;
  }
  return out;
}

std::string ShapeCell(const OpNode& op) {
  if (op.outputs.empty()) return "-";
  const std::vector<int64_t>& shape = op.outputs[0].shape;
  if (shape.empty()) return "scalar";
  std::string out = absl::StrJoin(shape, "x");
  if (op.outputs.size() > 1) absl::StrAppend(&out, " (+", op.outputs.size() - 1, ")");
  return out;
}

}  // namespace

OpsCommand::OpsCommand(CLI::App* app) {
  ops_ = app->add_subcommand("ops", "List the ops of an op graph (trace.export) as a table");
  ops_->add_option("file", file_,
                   "Op graph file (JSON, from OpTrace.export), or a training trace that kept one "
                   "(TraceSession(ops=\"on_nan\"))")
      ->required();
  ops_->add_option("--func", funcs_, "Only ops of this function (conv2d; relu matches relu_ too)");
  ops_->add_option("--in-module", in_modules_,
                   "Only ops run inside this module pass (layer2, layer2:1), nested ones too");
  ops_->add_option("--module", modules_, "Only the op whose output is this module's output");
  ops_->add_option("--label", labels_, "Only the op with this label (conv2d_1_1)");
  ops_->add_option("--select", select_,
                   "A selector expression: \"func('conv2d') & ~in_module('layer2')\"");
  ops_->add_flag("--json", json_, "Print the selected ops as JSON");
}

int OpsCommand::Run(const Style& style, const CliEnvironment& env) const {
  OpSelector selector = OpSelector::All();
  bool filtered = false;
  const auto add = [&](std::optional<OpSelector> s) {
    if (!s) return;
    selector = filtered ? (selector & *s) : *s;
    filtered = true;
  };
  add(AnyOf(funcs_, &OpSelector::Func));
  add(AnyOf(in_modules_, &OpSelector::InModule));
  add(AnyOf(modules_, &OpSelector::Module));
  add(AnyOf(labels_, &OpSelector::Label));
  if (!select_.empty()) {
    absl::StatusOr<OpSelector> parsed = OpSelector::Parse(select_);
    if (!parsed.ok()) return Fail(env, std::string(parsed.status().message()));
    add(*parsed);
  }
  absl::StatusOr<OpGraph> graph = ReadOpGraphFile(file_);
  // The words of every other file command ("x.json: file not found").
  if (!graph.ok()) return Fail(env, DescribeLoadError(file_, graph.status()));
  std::vector<int32_t> selected;
  for (size_t i = 0; i < graph->ops.size(); ++i) {
    if (selector.Matches(*graph, static_cast<int32_t>(i))) {
      selected.push_back(static_cast<int32_t>(i));
    }
  }
  if (json_) {
    std::string out;
    JsonWriter w(1, &out);
    w.BeginObject();
    w.PlainKey("file");
    w.String(file_);
    w.PlainKey("selector");
    w.String(selector.ToString());
    w.PlainKey("count");
    w.Int(static_cast<int64_t>(selected.size()));
    w.PlainKey("ops");
    w.BeginArray();
    for (int32_t i : selected) WriteOpNodeJson(graph->ops[i], w);
    w.EndArray();
    w.EndObject();
    w.Finish();
    PrintLine(std::move(out), env);
    return kExitOk;
  }
  Table table;
  table.title = absl::StrCat(Sanitize(graph->model_name), " (", Sanitize(graph->source),
                             "): ", selected.size(), " of ", graph->ops.size(), " ops",
                             filtered ? absl::StrCat(", ", Sanitize(selector.ToString())) : "");
  table.header = {"Op", "Function", "Module", "Shape", "Params", "Time (ms)", "Parents"};
  for (int32_t i : selected) {
    const OpNode& op = graph->ops[i];
    std::vector<std::string> parents;
    for (int32_t p : op.parents) parents.push_back(Sanitize(graph->ops[p].label));
    table.rows.push_back(
        {Sanitize(op.label), Sanitize(op.op_name),
         op.module_pass >= 0 ? Sanitize(graph->ModuleAddress(op.module_pass)) : "-", ShapeCell(op),
         op.params > 0 ? absl::StrCat(op.params) : "-",
         op.time_ms ? absl::StrFormat("%.3f", *op.time_ms) : "-",
         parents.empty() ? "-" : absl::StrJoin(parents, ", ")});
  }
  *env.out << RenderTable(table, style);
  env.out->flush();
  return kExitOk;
}

}  // namespace tracetorch::cli
