#include "cli/report_command.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "report/tensorboard/event_file.h"
#include "report/tensorboard/trace_events.h"
#include "trace/json_writer.h"
#include "view/command_io.h"
#include "view/source.h"

#ifndef TRACETORCH_VERSION
#define TRACETORCH_VERSION "unknown"
#endif

namespace tracetorch::cli {

using ::tracetorch::view::CliEnvironment;
using ::tracetorch::view::Fail;
using ::tracetorch::view::kExitOk;
using ::tracetorch::view::LoadTraceFile;
using ::tracetorch::view::Note;
using ::tracetorch::view::PrintLine;
namespace {

report::ReportOptions Options() {
  return report::ReportOptions{.generator = "tracetorch " TRACETORCH_VERSION};
}

void AddSource(CLI::App* app, std::string* remote, std::string* target, CLI::Option** option,
               const std::string& what) {
  app->add_option("source", *target,
                  absl::StrCat("Trace file (JSON); with --remote: a session id or 'latest' (", what,
                               " with its per-step history)"));
  *option = app->add_option("--remote", *remote,
                            "Read a tracetorchd session: --remote [ADDR] SESSION|latest (default "
                            "address: as for 'sessions')")
                ->expected(0, 1)
                ->type_name("[ADDR]");
}

}  // namespace

int WriteDiffHtml(const std::string& path, const report::DiffReportInput& input,
                  const CliEnvironment& env) {
  if (absl::Status s = report::WriteReportFile(path, report::RenderDiffReport(input, Options()));
      !s.ok()) {
    return Fail(env, absl::StrCat(path, ": ", s.message()));
  }
  Note(env, absl::StrCat("HTML report written to ", path));
  return kExitOk;
}

ReportCommand::ReportCommand(CLI::App* app) {
  report_ = app->add_subcommand(
      "report",
      "Write a trace's HTML report: one self-contained file (summary, anomalies, "
      "charts, layer tree, op graph)");
  AddSource(report_, &report_source_.remote, &report_source_.target, &report_source_.remote_option,
            "reported");
  report_->add_option("-o,--output", output_, "The HTML file to write (atomically)")->required();

  export_ = app->add_subcommand(
      "export", "Write a trace (and a session's per-step history) as TensorBoard event files");
  export_
      ->add_option("--tensorboard", tensorboard_dir_,
                   "TensorBoard log directory: a new event file is written in it")
      ->required();
  AddSource(export_, &export_source_.remote, &export_source_.target, &export_source_.remote_option,
            "exported");
  export_->add_flag("--json", json_, "Print every scalar written, as JSON");
}

absl::StatusOr<FetchedTrace> ReportCommand::Load(const Source& source, const DaemonCommands* daemon,
                                                 const CliEnvironment& env) const {
  if (source.remote_option->count() == 0) {
    if (source.target.empty()) {
      return absl::InvalidArgumentError("a trace FILE is needed, or --remote [ADDR] SESSION");
    }
    absl::StatusOr<TraceRecord> record = LoadTraceFile(source.target);
    if (!record.ok()) return record.status();
    if (std::string note = DescribeUnknownAnomalyTypes(*record); !note.empty()) {
      Note(env, absl::StrCat(source.target, ": ", note));
    }
    return FetchedTrace{.record = *std::move(record), .history = {}, .description = source.target};
  }
  // REQUIRES (the callers check): daemon != nullptr.
  // `--remote X` alone: X is the session (--remote took it as its value).
  FetchRequest request{.remote = source.remote, .session = source.target};
  if (request.session.empty()) std::swap(request.remote, request.session);
  if (request.session.rfind("session:", 0) == 0) request.session.erase(0, 8);  // As diff spells it.
  if (request.session.empty()) {
    return absl::InvalidArgumentError("--remote needs a SESSION (an id or 'latest')");
  }
  if (request.session.rfind("baseline:", 0) == 0) {
    return absl::InvalidArgumentError(
        "a baseline has no report of its own; diff it: tracetorch diff --remote baseline:NAME "
        "latest --html FILE");
  }
  return daemon->Fetch(request);
}

int ReportCommand::Run(const CliEnvironment& env, const DaemonCommands* daemon) const {
  return report_->parsed() ? RunReport(env, daemon) : RunExport(env, daemon);
}

int ReportCommand::RunReport(const CliEnvironment& env, const DaemonCommands* daemon) const {
  if (report_source_.remote_option->count() > 0 && daemon == nullptr) return kNeedsDaemonClient;
  absl::StatusOr<FetchedTrace> trace = Load(report_source_, daemon, env);
  if (!trace.ok()) return Fail(env, std::string(trace.status().message()));
  const std::string html = report::RenderTraceReport(
      {.record = &trace->record, .history = &trace->history, .source = trace->description},
      Options());
  if (absl::Status s = report::WriteReportFile(output_, html); !s.ok()) {
    return Fail(env, absl::StrCat(output_, ": ", s.message()));
  }
  PrintLine(absl::StrCat("wrote ", output_, " (", html.size() / 1024, " KiB; ",
                         trace->record.layers.size(), " layers, ",
                         trace->history.empty()
                             ? std::string("no per-step history")
                             : absl::StrCat(trace->history.layers.size(), " with per-step history"),
                         ")"),
            env);
  return kExitOk;
}

int ReportCommand::RunExport(const CliEnvironment& env, const DaemonCommands* daemon) const {
  if (export_source_.remote_option->count() > 0 && daemon == nullptr) return kNeedsDaemonClient;
  absl::StatusOr<FetchedTrace> trace = Load(export_source_, daemon, env);
  if (!trace.ok()) return Fail(env, std::string(trace.status().message()));
  absl::StatusOr<std::unique_ptr<tensorboard::EventFileWriter>> writer =
      tensorboard::EventFileWriter::Create(tensorboard_dir_, {});
  if (!writer.ok()) return Fail(env, std::string(writer.status().message()));
  std::string listing;
  JsonWriter w(0, &listing);
  w.BeginObject();
  w.PlainKey("file");
  w.String((*writer)->path());
  w.PlainKey("scalars");
  w.BeginArray();
  tensorboard::ScalarObserver observe;
  if (json_) {
    observe = [&w](const tensorboard::WrittenScalar& s) {
      w.BeginObject();
      w.PlainKey("tag");
      w.String(s.tag);
      w.PlainKey("step");
      w.Int(s.step);
      w.PlainKey("value");
      w.Double(s.value);
      w.EndObject();
    };
  }
  absl::StatusOr<tensorboard::ExportCounts> counts =
      tensorboard::WriteTraceEvents(trace->record, trace->history, writer->get(), observe);
  if (counts.ok()) {
    if (absl::Status s = (*writer)->Close(); !s.ok()) counts = s;
  }
  if (!counts.ok()) return Fail(env, std::string(counts.status().message()));
  w.EndArray();
  w.PlainKey("texts");
  w.UInt(counts->texts);
  w.EndObject();
  w.Finish();
  if (json_) {
    PrintLine(std::move(listing), env);
  } else {
    PrintLine(absl::StrCat("wrote ", counts->scalars, " scalars and ", counts->texts,
                           " text (anomalies) to ", (*writer)->path(), "\n(tensorboard --logdir ",
                           tensorboard_dir_, ")"),
              env);
  }
  return kExitOk;
}

}  // namespace tracetorch::cli
