#include "cli/commands.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "cli/command_io.h"
#include "cli/filter.h"
#include "cli/json_output.h"
#include "cli/labels.h"
#include "cli/live_view.h"
#include "cli/ops_command.h"
#include "cli/remote_diff.h"
#include "cli/remote_watch.h"
#include "cli/render.h"
#include "cli/source.h"
#include "cli/terminal.h"
#include "cli/watch.h"
#include "protocol/address.h"
#include "protocol/record_proto.h"
#include "service_client/service_client.h"
#include "trace/anomaly.h"
#include "trace/diff.h"
#include "trace/json.h"

#ifndef TRACETORCH_VERSION
#define TRACETORCH_VERSION "unknown"
#endif

namespace tracetorch::cli {
namespace {

// Options shared by every subcommand, set on the top-level app (fallthrough lets them follow the
// subcommand too).
struct GlobalArgs {
  std::string color = "auto";
};

struct FilterArgs {
  LayerFilter filter;
  double min_latency_ms = 0;
  CLI::Option* min_latency_option = nullptr;

  void AddTo(CLI::App* app) {
    app->add_option(
        "--filter", filter.name_glob,
        "Only layers whose full name matches this glob (fnmatch; '*' also matches '.')");
    app->add_option("--type", filter.type, "Only layers of this class (exact, e.g. Linear)");
    min_latency_option = app->add_option("--min-latency", min_latency_ms,
                                         "Only layers whose mean forward latency is >= MS");
  }
  LayerFilter Get() const {
    LayerFilter out = filter;
    if (min_latency_option->count() > 0) out.min_latency_ms = min_latency_ms;
    return out;
  }
};

struct InspectArgs {
  std::string file;
  FilterArgs filter;
  bool json = false;
  bool recompute = false;
};

struct SummaryArgs {
  std::string file;
  bool recompute = false;
};

struct DiffArgs {
  std::string baseline;
  std::string current;
  DiffThresholds thresholds;
  bool json = false;
};

struct SessionsArgs {
  std::string remote;
  bool json = false;
};

struct SnapshotArgs {
  std::string session;
  std::string output;
  std::string remote;
};

struct WatchArgs {
  std::vector<std::string> targets;  // FILE; or with --remote: [ADDR] [SESSION].
  FilterArgs filter;
  double interval_s = 1.0;
  CLI::Option* interval_option = nullptr;
  bool recompute = false;
  std::string remote;  // --remote's optional value (cli/remote_watch.h).
  CLI::Option* remote_option = nullptr;
  std::string job;
  bool json = false;
  double connect_timeout_s = 3.0;
};

// Replaces the stored warnings with a fresh DetectAnomalies run (default thresholds).
absl::Status Recompute(TraceRecord* record) {
  absl::StatusOr<std::vector<Anomaly>> anomalies = DetectAnomalies(*record);
  if (!anomalies.ok()) return anomalies.status();
  record->warnings = *std::move(anomalies);
  return absl::OkStatus();
}

// Loads `path`, re-running anomaly detection if asked. The error is a DescribeLoadError line.
absl::StatusOr<TraceRecord> Load(const std::string& path, bool recompute) {
  absl::StatusOr<TraceRecord> record = LoadTraceFile(path);
  if (!record.ok() || !recompute) return record;
  if (absl::Status s = Recompute(&*record); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": anomaly detection failed: ", s.message()));
  }
  return record;
}

int RunInspect(const InspectArgs& args, const Style& style, const CliEnvironment& env) {
  const LayerFilter filter = args.filter.Get();
  if (absl::Status s = filter.Validate(); !s.ok()) return Fail(env, std::string(s.message()));
  absl::StatusOr<TraceRecord> record = Load(args.file, args.recompute);
  if (!record.ok()) return Fail(env, std::string(record.status().message()));
  if (args.json) {
    PrintLine(TraceToJson(ApplyFilter(*record, filter)), env);
  } else {
    *env.out << RenderInspect(*record, filter, style);
    env.out->flush();
  }
  return kExitOk;
}

int RunSummary(const SummaryArgs& args, const Style& style, const CliEnvironment& env) {
  absl::StatusOr<TraceRecord> record = Load(args.file, args.recompute);
  if (!record.ok()) return Fail(env, std::string(record.status().message()));
  *env.out << RenderSummary(*record, style);
  env.out->flush();
  return kExitOk;
}

int RunDiff(const DiffArgs& args, const Style& style, const CliEnvironment& env) {
  if (args.current.empty()) {
    return Fail(env, "diff needs two traces: BASELINE CURRENT (see 'tracetorch diff --help')");
  }
  if (absl::Status s = args.thresholds.Validate(); !s.ok()) {
    return Fail(env, std::string(s.message()));  // "invalid diff thresholds: ..."
  }
  absl::StatusOr<TraceRecord> baseline = Load(args.baseline, /*recompute=*/false);
  if (!baseline.ok()) return Fail(env, std::string(baseline.status().message()));
  absl::StatusOr<TraceRecord> current = Load(args.current, /*recompute=*/false);
  if (!current.ok()) return Fail(env, std::string(current.status().message()));

  return ReportDiff(DiffRecords(*baseline, *current, args.thresholds), args.json, style, env);
}

// `watch --remote [ADDR] [SESSION]` / `watch --job JOB` (cli/remote_watch.h).
int RunWatchRemote(const WatchArgs& args, const LayerFilter& filter, const Style& style,
                   const CliEnvironment& env) {
  if (args.recompute) return Fail(env, "--recompute applies to a trace FILE, not to --remote");
  if (!std::isfinite(args.connect_timeout_s) || args.connect_timeout_s < 0 ||
      args.connect_timeout_s > 3600) {
    return Fail(env, absl::StrCat("--connect-timeout must be a number of seconds in [0, 3600], "
                                  "got ",
                                  args.connect_timeout_s));
  }
  absl::StatusOr<RemoteWatchTarget> target = ResolveRemoteWatchTarget(RemoteWatchArgs{
      .remote_value = args.remote,
      .targets = args.targets,
      .job_id = args.job,
      .default_address = protocol::DefaultServiceAddress(),
  });
  if (!target.ok()) return Fail(env, std::string(target.status().message()));
  RemoteWatchOptions options;
  options.interval = absl::Seconds(args.interval_option->count() > 0 ? args.interval_s : 0.5);
  options.json = args.json;
  options.redraw_in_place = env.stdout_is_tty && !args.json;
  options.view.style = args.json ? Style::Plain() : style;
  options.view.filter = filter;
  options.terminal_size = [] { return QueryTerminalSize(STDOUT_FILENO); };
  options.connect_timeout = absl::Seconds(args.connect_timeout_s);
  // The signal mask first: the gRPC threads started next inherit it.
  const Waiter wait = env.wait ? env.wait : MakeSignalWaiter();
  absl::Status s = RunRemoteWatchCommand(*target, std::move(options), env.out, wait);
  if (!s.ok()) return Fail(env, std::string(s.message()));
  return kExitOk;
}

int RunWatch(const WatchArgs& args, const Style& style, const CliEnvironment& env) {
  const LayerFilter filter = args.filter.Get();
  if (absl::Status s = filter.Validate(); !s.ok()) return Fail(env, std::string(s.message()));
  if (!std::isfinite(args.interval_s) || args.interval_s <= 0 || args.interval_s > 86400) {
    return Fail(env, absl::StrCat("--interval must be a number of seconds in (0, 86400], got ",
                                  args.interval_s));
  }
  if (args.remote_option->count() > 0 || !args.job.empty()) {
    return RunWatchRemote(args, filter, style, env);
  }
  if (args.json) {
    return Fail(env, "--json needs --remote or --job (for a trace FILE use inspect --json)");
  }
  if (args.targets.size() != 1) {
    return Fail(env,
                "watch needs one trace FILE, or --remote [ADDR] [SESSION] "
                "(see 'tracetorch watch --help')");
  }
  const std::string& file = args.targets.front();
  FileTraceSource source(file);
  const bool recompute = args.recompute;
  const bool tty = env.stdout_is_tty;
  // The live view's body (live_view.h) without history: a file holds no per-step values.
  FrameRenderer render = [&filter, &style, recompute, tty](const TraceRecord& record) {
    LiveViewOptions view;
    view.style = style;
    view.filter = filter;
    view.width = tty ? QueryTerminalSize(STDOUT_FILENO).columns : 0;
    if (!recompute) return TruncateLines(RenderLiveBody(record, nullptr, view), view.width, style);
    TraceRecord copy = record;
    (void)Recompute(
        &copy);  // Cannot fail with the default thresholds; keeps the stored ones if so.
    return TruncateLines(RenderLiveBody(copy, nullptr, view), view.width, style);
  };
  WatchOptions options{
      .label = file,
      .interval = absl::Seconds(args.interval_s),
      .redraw_in_place = env.stdout_is_tty,
      .style = style,
  };
  Watcher watcher(&source, std::move(render), std::move(options), env.out);
  watcher.Run(env.wait ? env.wait : MakeSignalWaiter());
  return kExitOk;
}

// ---- Remote (tracetorchd) -------------------------------------------------------------------

// The daemon's TraceService: `remote`, else the RPC socket next to the agents' socket.
std::string ServiceAddress(const std::string& remote) {
  return remote.empty() ? protocol::DefaultServiceAddress() : remote;
}

std::string SessionsToText(const v1::ListSessionsResponse& list) {
  if (list.sessions_size() == 0) return "no sessions\n";
  std::string out = absl::StrFormat("%-44s %-9s %8s %5s %-20s %-20s %10s %8s\n", "SESSION", "STATE",
                                    "PID", "RANK", "MODEL", "STARTED", "EVENTS", "DROPPED");
  for (const v1::SessionInfo& s : list.sessions()) {
    const v1::ProcessIdentity& id = s.identity();
    absl::StrAppendFormat(&out, "%-44s %-9s %8d %5s %-20s %-20s %10d %8d\n",
                          Sanitize(s.session_id()), SessionStateName(s.state()), id.pid(),
                          id.has_rank() ? absl::StrCat(id.rank()) : std::string("-"),
                          id.model_name().empty() ? std::string("-") : Sanitize(id.model_name()),
                          FormatUnixTime(s.started_unix_ns()), s.events(), s.dropped_events());
  }
  return out;
}

int RunSessions(const SessionsArgs& args, const CliEnvironment& env) {
  const std::string address = ServiceAddress(args.remote);
  absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> rpc =
      ConnectToDaemon(address, absl::Seconds(5));
  if (!rpc.ok()) return Fail(env, std::string(rpc.status().message()));
  absl::StatusOr<v1::ListSessionsResponse> list = (*rpc)->ListSessions();
  if (!list.ok()) return Fail(env, DescribeRemoteError(list.status(), address));
  if (args.json) {
    PrintLine(SessionsToJson(*list), env);
  } else {
    *env.out << SessionsToText(*list);
    env.out->flush();
  }
  return kExitOk;
}

int RunSnapshot(const SnapshotArgs& args, const CliEnvironment& env) {
  const std::string address = ServiceAddress(args.remote);
  if (args.session.empty()) return Fail(env, "SESSION must not be empty (an id or 'latest')");
  absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> rpc =
      ConnectToDaemon(address, absl::Seconds(5));
  if (!rpc.ok()) return Fail(env, std::string(rpc.status().message()));
  absl::StatusOr<v1::Snapshot> snapshot = (*rpc)->GetSnapshot(args.session);
  if (!snapshot.ok()) {
    if (snapshot.status().code() == absl::StatusCode::kNotFound) {
      return Fail(env,
                  absl::StrCat("unknown session '", args.session, "' (see 'tracetorch sessions')"));
    }
    return Fail(env, DescribeRemoteError(snapshot.status(), address));
  }
  const TraceRecord record = FromProto(snapshot->record());
  if (args.output.empty()) {
    PrintLine(TraceToJson(record), env);
    return kExitOk;
  }
  if (absl::Status s = WriteTraceFile(args.output, record); !s.ok()) {
    return Fail(env, absl::StrCat(args.output, ": ", s.message()));
  }
  return kExitOk;
}

}  // namespace

Style ChooseStyle(std::string_view color, bool stdout_is_tty, bool no_color) {
  if (color == "always") return Style::Rich();
  if (color == "never") return Style::Plain();
  return stdout_is_tty && !no_color ? Style::Rich() : Style::Plain();
}

int RunTracetorch(int argc, const char* const* argv, const CliEnvironment& env) {
  CLI::App app("tracetorch: a forensic trace console for PyTorch models.", "tracetorch");
  app.set_version_flag("--version", "tracetorch " TRACETORCH_VERSION);
  app.fallthrough();

  GlobalArgs global;
  app.add_option("--color", global.color,
                 "Colours and box drawing: auto (only on a terminal without NO_COLOR), always, "
                 "never")
      ->check(CLI::IsMember({"auto", "always", "never"}));

  InspectArgs inspect_args;
  CLI::App* inspect = app.add_subcommand("inspect", "Show a trace: summary, layer tree, anomalies");
  inspect->add_option("file", inspect_args.file, "Trace file (JSON)")->required();
  inspect_args.filter.AddTo(inspect);
  inspect->add_flag("--json", inspect_args.json,
                    "Print the (filtered) trace as JSON: the selected layers and their anomalies");
  inspect->add_flag("--recompute", inspect_args.recompute,
                    "Re-run anomaly detection instead of showing the anomalies stored in the file");

  SummaryArgs summary_args;
  CLI::App* summary = app.add_subcommand("summary", "Show the model summary and anomaly counts");
  summary->add_option("file", summary_args.file, "Trace file (JSON)")->required();
  summary->add_flag("--recompute", summary_args.recompute,
                    "Re-run anomaly detection instead of counting the stored anomalies");

  DiffArgs diff_args;
  CLI::App* diff = app.add_subcommand(
      "diff", "Compare two traces; exit code 1 when a warning or critical change is found");
  diff->add_option("baseline", diff_args.baseline,
                   "Baseline trace file (JSON); with --remote also session:ID, latest, "
                   "baseline:NAME")
      ->required();
  // Not required: `diff --remote A B` parses A as --remote's value (RemoteDiffCommand::Run).
  diff->add_option("current", diff_args.current, "Current trace file (JSON); as baseline");
  RemoteDiffCommand remote_diff(diff);
  diff->add_option("--latency-threshold", diff_args.thresholds.latency,
                   "Relative change of mean latency to report (default 0.10 = 10%); with --remote "
                   "and per-step history on both sides, of the median and beyond the step noise");
  diff->add_option("--grad-norm-threshold", diff_args.thresholds.grad_norm,
                   "Relative change of gradient norm to report (default 0.25)");
  diff->add_option("--std-threshold", diff_args.thresholds.std,
                   "Relative change of output std to report (default 0.25)");
  diff->add_flag("--json", diff_args.json, "Print the diff as JSON");

  WatchArgs watch_args;
  CLI::App* watch =
      app.add_subcommand("watch",
                         "Show a trace file, or a live tracetorchd session (--remote) or "
                         "job (--job), and redraw it as it changes");
  watch->add_option("target", watch_args.targets,
                    "Trace FILE (JSON; may not exist yet); with --remote: [ADDR] [SESSION|latest]");
  watch_args.interval_option = watch->add_option(
      "--interval", watch_args.interval_s,
      "Seconds between checks (default 1); with --remote, between updates (default 0.5)");
  watch_args.remote_option =
      watch
          ->add_option("--remote", watch_args.remote,
                       "Watch a tracetorchd session live: --remote [ADDR] [SESSION|latest] "
                       "(default address: as for 'sessions'; default session: latest)")
          ->expected(0, 1);
  watch->add_option("--job", watch_args.job, "Watch every rank of this job side by side");
  watch->add_flag("--json", watch_args.json,
                  "With --remote: one JSON document per update, one per line (for scripts)");
  watch->add_option("--connect-timeout", watch_args.connect_timeout_s,
                    "With --remote: how long to wait for the daemon and the session at start "
                    "(default 3 s)");
  watch_args.filter.AddTo(watch);
  watch->add_flag("--recompute", watch_args.recompute,
                  "Re-run anomaly detection instead of showing the stored anomalies");

  BaselineCommand baseline_command(&app);
  OpsCommand ops_command(&app);

  SessionsArgs sessions_args;
  CLI::App* sessions =
      app.add_subcommand("sessions", "List the sessions tracetorchd knows (live and past)");
  sessions->add_option("--remote", sessions_args.remote,
                       "The daemon's TraceService socket (default: tracetorchd-rpc.sock beside "
                       "the agents' socket, $TRACETORCH_DAEMON; or $TRACETORCH_DAEMON_RPC)");
  sessions->add_flag("--json", sessions_args.json, "Print the sessions as JSON");

  SnapshotArgs snapshot_args;
  CLI::App* snapshot = app.add_subcommand(
      "snapshot", "Fetch a daemon session's trace as JSON (for inspect and diff)");
  snapshot->add_option("session", snapshot_args.session, "Session id, or 'latest'")->required();
  snapshot->add_option("-o,--output", snapshot_args.output,
                       "Write the trace to FILE (atomically) instead of stdout");
  snapshot->add_option("--remote", snapshot_args.remote,
                       "The daemon's TraceService socket (default as for 'sessions')");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    *env.out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    *env.out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion& e) {
    *env.out << e.what() << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    std::string where = "tracetorch";
    for (const CLI::App* sub : app.get_subcommands())
      where = absl::StrCat(where, " ", sub->get_name());
    return Fail(env, absl::StrCat(e.what(), " (see '", where, " --help')"));
  }

  const Style style = ChooseStyle(global.color, env.stdout_is_tty, env.no_color);
  if (inspect->parsed()) return RunInspect(inspect_args, style, env);
  if (summary->parsed()) return RunSummary(summary_args, style, env);
  if (diff->parsed()) {
    return remote_diff.requested()
               ? remote_diff.Run(diff_args.baseline, diff_args.current, diff_args.thresholds,
                                 diff_args.json, style, env)
               : RunDiff(diff_args, style, env);
  }
  if (baseline_command.parsed()) return baseline_command.Run(env);
  if (ops_command.parsed()) return ops_command.Run(style, env);
  if (watch->parsed()) return RunWatch(watch_args, style, env);
  if (sessions->parsed()) return RunSessions(sessions_args, env);
  if (snapshot->parsed()) return RunSnapshot(snapshot_args, env);

  *env.err << app.help();
  return kExitUsage;
}

}  // namespace tracetorch::cli
