#include "cli/commands.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cli/audit_command.h"
#include "cli/daemon_commands.h"
#include "cli/graph_command.h"
#include "cli/ops_command.h"
#if TRACETORCH_HAVE_REPORT
#include "cli/report_command.h"
#endif
#include "trace/diff.h"
#include "view/command_io.h"
#include "view/file_commands.h"
#include "view/filter.h"

#ifndef TRACETORCH_VERSION
#define TRACETORCH_VERSION "unknown"
#endif

namespace tracetorch::cli {

using ::tracetorch::view::ChooseStyle;
using ::tracetorch::view::CliEnvironment;
using ::tracetorch::view::ComparedTraces;
using ::tracetorch::view::CompareTraceFiles;
using ::tracetorch::view::DiffRequest;
using ::tracetorch::view::Fail;
using ::tracetorch::view::InspectRequest;
using ::tracetorch::view::kExitOk;
using ::tracetorch::view::kExitUsage;
using ::tracetorch::view::LayerFilter;
using ::tracetorch::view::ReportDiff;
using ::tracetorch::view::RunDiff;
using ::tracetorch::view::RunInspect;
using ::tracetorch::view::RunSummary;
using ::tracetorch::view::RunWatchFile;
using ::tracetorch::view::Style;
using ::tracetorch::view::SummaryRequest;
using ::tracetorch::view::ValidateWatchInterval;

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

  InspectRequest Get() const {
    return {.file = file, .filter = filter.Get(), .json = json, .recompute = recompute};
  }
};

struct DiffArgs {
  DiffRequest request;
  std::string html;  // --html FILE.
};

// `diff --remote [ADDR]`: an option with an optional value, on the `diff` subcommand.
struct RemoteDiffArgs {
  CLI::Option* remote = nullptr;
  std::string address;

  void AddTo(CLI::App* diff) {
    remote = diff->add_option("--remote", address,
                              "Diff on tracetorchd: operands may be session:ID, latest, "
                              "baseline:NAME or a trace file (uploaded); ADDR is optional "
                              "(default: as for 'sessions')")
                 ->expected(0, 1)
                 ->type_name("[ADDR]");
  }
  bool requested() const { return remote->count() > 0; }
};

struct BaselineArgs {
  CLI::App* baseline = nullptr;
  CLI::App* set = nullptr;
  CLI::App* list = nullptr;
  CLI::App* rm = nullptr;
  BaselineRequest request;

  void AddTo(CLI::App* app) {
    baseline = app->add_subcommand(
        "baseline",
        "Named reference traces kept by tracetorchd, for 'diff --remote baseline:NAME'");
    baseline->require_subcommand(1);
    const std::string remote_help =
        "The daemon: either of its sockets, or HOST:PORT (default: as for 'sessions')";
    set = baseline->add_subcommand(
        "set", "Store (or replace) a baseline from a session, another baseline or a trace file");
    set->add_option("name", request.name, "Baseline name: letters, digits, '.', '_', '-'")
        ->required();
    set->add_option("source", request.source,
                    "session:ID, latest, baseline:NAME, a trace file, or a session id")
        ->required();
    set->add_option("--remote", request.remote, remote_help);
    list = baseline->add_subcommand("list", "List the baselines");
    list->add_flag("--json", request.json, "Print the baselines as JSON");
    list->add_option("--remote", request.remote, remote_help);
    rm = baseline->add_subcommand("rm", "Remove a baseline");
    rm->add_option("name", request.name, "Baseline name")->required();
    rm->add_option("--remote", request.remote, remote_help);
  }
  BaselineRequest Get() const {
    BaselineRequest out = request;
    out.action = set->parsed()  ? BaselineRequest::Action::kSet
                 : rm->parsed() ? BaselineRequest::Action::kRemove
                                : BaselineRequest::Action::kList;
    return out;
  }
};

struct WatchArgs {
  std::vector<std::string> targets;  // FILE; or with --remote: [ADDR] [SESSION].
  FilterArgs filter;
  double interval_s = 0.5;
  CLI::Option* interval_option = nullptr;
  bool recompute = false;
  std::string remote;  // --remote's optional value (cli/remote_watch.h).
  CLI::Option* remote_option = nullptr;
  std::string job;
  bool json = false;
  double connect_timeout_s = 3.0;
};

// `diff BASELINE CURRENT`: view::RunDiff; with --html FILE, the diff as it prints it, then the
// diff's HTML report (report/).
int RunLocalDiff(const DiffArgs& args, const Style& style, const CliEnvironment& env) {
#if TRACETORCH_HAVE_REPORT
  if (args.html.empty()) return RunDiff(args.request, style, env);
  absl::StatusOr<ComparedTraces> compared = CompareTraceFiles(args.request, env);
  if (!compared.ok()) return Fail(env, std::string(compared.status().message()));
  const int code = ReportDiff(compared->diff, args.request.json, style, env);
  const int written =
      WriteDiffHtml(args.html,
                    {.diff = &compared->diff,
                     .baseline = {&compared->baseline, nullptr, args.request.baseline},
                     .current = {&compared->current, nullptr, args.request.current},
                     .thresholds = args.request.thresholds,
                     .exit_status = code},
                    env);
  return written != kExitOk ? written : code;
#else
  return RunDiff(args.request, style, env);  // No --html option without report/.
#endif
}

// `diff --remote A B`: the option may have taken A as its address. Puts it back where it was
// written.
int RunDiffRemote(const DiffArgs& args, const RemoteDiffArgs& remote, CLI::App* diff,
                  const Style& style, const CliEnvironment& env, const DaemonCommands* daemon) {
  RemoteDiffRequest request{.address = remote.address,
                            .baseline = args.request.baseline,
                            .current = args.request.current,
                            .thresholds = args.request.thresholds,
                            .json = args.request.json,
                            .html = args.html};
  if (request.current.empty()) {
    if (request.address.empty() || request.baseline.empty()) {
      return Fail(env,
                  "diff --remote needs two operands: BASELINE CURRENT (see 'tracetorch diff "
                  "--help')");
    }
    bool remote_first = false;
    for (const CLI::Option* o : diff->parse_order()) {
      if (o == remote.remote) {
        remote_first = true;
        break;
      }
      if (o->get_name() == "baseline") break;
    }
    if (remote_first) {
      request.current = std::move(request.baseline);
      request.baseline = std::move(request.address);
    } else {
      request.current = std::move(request.address);
    }
    request.address.clear();
  }
  if (daemon == nullptr) return kNeedsDaemonClient;
  return daemon->Diff(request, style, env);
}

// `watch --remote [ADDR] [SESSION]` / `watch --job JOB`.
int RunWatchRemote(const WatchArgs& args, const LayerFilter& filter, const Style& style,
                   const CliEnvironment& env, const DaemonCommands* daemon) {
  if (args.recompute) return Fail(env, "--recompute applies to a trace FILE, not to --remote");
  if (daemon == nullptr) return kNeedsDaemonClient;
  RemoteWatchRequest request{
      .remote_value = args.remote,
      .targets = args.targets,
      .job_id = args.job,
      .interval_s =
          args.interval_option->count() > 0 ? std::optional<double>(args.interval_s) : std::nullopt,
      .json = args.json,
      .connect_timeout_s = args.connect_timeout_s,
      .filter = filter,
  };
  return daemon->Watch(request, style, env);
}

int RunWatch(const WatchArgs& args, const Style& style, const CliEnvironment& env,
             const DaemonCommands* daemon) {
  const LayerFilter filter = args.filter.Get();
  if (absl::Status s = filter.Validate(); !s.ok()) return Fail(env, std::string(s.message()));
  if (absl::Status s = ValidateWatchInterval(args.interval_s); !s.ok()) {
    return Fail(env, std::string(s.message()));
  }
  if (args.remote_option->count() > 0 || !args.job.empty()) {
    return RunWatchRemote(args, filter, style, env, daemon);
  }
  if (args.json) {
    return Fail(env, "--json needs --remote or --job (for a trace FILE use inspect --json)");
  }
  if (args.targets.size() != 1) {
    return Fail(env,
                "watch needs one trace FILE, or --remote [ADDR] [SESSION] "
                "(see 'tracetorch watch --help')");
  }
  return RunWatchFile({.file = args.targets.front(),
                       .filter = filter,
                       .interval_s = args.interval_s,
                       .recompute = args.recompute},
                      style, env);
}

}  // namespace

int RunTracetorchCommand(int argc, const char* const* argv, const CliEnvironment& env,
                         const DaemonCommands* daemon) {
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

  SummaryRequest summary_args;
  CLI::App* summary = app.add_subcommand("summary", "Show the model summary and anomaly counts");
  summary->add_option("file", summary_args.file, "Trace file (JSON)")->required();
  summary->add_flag("--recompute", summary_args.recompute,
                    "Re-run anomaly detection instead of counting the stored anomalies");

  DiffArgs diff_args;
  CLI::App* diff = app.add_subcommand(
      "diff", "Compare two traces; exit code 1 when a warning or critical change is found");
  diff->add_option("baseline", diff_args.request.baseline,
                   "Baseline trace file (JSON); with --remote also session:ID, latest, "
                   "baseline:NAME")
      ->required();
  // Not required: `diff --remote A B` parses A as --remote's value (RunDiffRemote).
  diff->add_option("current", diff_args.request.current, "Current trace file (JSON); as baseline");
  RemoteDiffArgs remote_diff;
  remote_diff.AddTo(diff);
  diff->add_option("--latency-threshold", diff_args.request.thresholds.latency,
                   "Relative change of mean latency to report (default 0.10 = 10%); with --remote "
                   "and per-step history on both sides, of the median and beyond the step noise");
  diff->add_option("--grad-norm-threshold", diff_args.request.thresholds.grad_norm,
                   "Relative change of gradient norm to report (default 0.25)");
  diff->add_option("--std-threshold", diff_args.request.thresholds.std,
                   "Relative change of output std to report (default 0.25)");
  diff->add_flag("--json", diff_args.request.json, "Print the diff as JSON");
#if TRACETORCH_HAVE_REPORT
  diff->add_option("--html", diff_args.html,
                   "Also write the diff's HTML report (one self-contained file) to FILE");
#endif

  WatchArgs watch_args;
  CLI::App* watch =
      app.add_subcommand("watch",
                         "Show a trace file, or a live tracetorchd session (--remote) or "
                         "job (--job), and redraw it as it changes");
  watch->add_option("target", watch_args.targets,
                    "Trace FILE (JSON; may not exist yet); with --remote: [ADDR] [SESSION|latest]");
  watch_args.interval_option =
      watch->add_option("--interval", watch_args.interval_s,
                        "Seconds between checks; with --remote, between updates (default 0.5)");
  watch_args.remote_option =
      watch
          ->add_option("--remote", watch_args.remote,
                       "Watch a tracetorchd session live: --remote [ADDR] [SESSION|latest] "
                       "(default address: as for 'sessions'; default session: latest); with "
                       "--job, ADDR may name several daemons: A,B,... (a job across nodes)")
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

  BaselineArgs baseline_args;
  baseline_args.AddTo(&app);
  OpsCommand ops_command(&app);
  GraphCommand graph_command(&app);
  AuditCommand audit_command(&app);
#if TRACETORCH_HAVE_REPORT
  ReportCommand report_command(&app);
#endif

  SessionsRequest sessions_args;
  CLI::App* sessions =
      app.add_subcommand("sessions", "List the sessions tracetorchd knows (live and past)");
  sessions->add_option("--remote", sessions_args.remote,
                       "The daemon: either of its sockets, or HOST:PORT (default: the agents' "
                       "socket, $TRACETORCH_DAEMON, else $XDG_RUNTIME_DIR/tracetorch/"
                       "tracetorchd.sock or /run/tracetorch/tracetorchd.sock; "
                       "$TRACETORCH_DAEMON_RPC overrides); A,B,... lists the sessions of several "
                       "daemons, with a DAEMON column");
  sessions->add_flag("--json", sessions_args.json, "Print the sessions as JSON");

  SnapshotRequest snapshot_args;
  CLI::App* snapshot = app.add_subcommand(
      "snapshot", "Fetch a daemon session's trace as JSON (for inspect and diff)");
  snapshot->add_option("session", snapshot_args.session, "Session id, or 'latest'")->required();
  snapshot->add_option("-o,--output", snapshot_args.output,
                       "Write the trace to FILE (atomically) instead of stdout");
  snapshot->add_option("--remote", snapshot_args.remote,
                       "The daemon (default as for 'sessions'); A,B,...: "
                       "the daemon among them that has the session ('latest': over all)");

  ForensicsRequest forensics_args;
  CLI::App* forensics = app.add_subcommand(
      "forensics",
      "Where a daemon session's process was when it hung, crashed or went NaN, and what led "
      "there (its forensic bundles); with --job, where each rank of a job is and which stopped "
      "first");
  forensics->add_option("session", forensics_args.session, "Session id, or 'latest' (default)");
  forensics->add_option("--job", forensics_args.job_id,
                        "The job's view instead: every rank, which stopped first, which saw a "
                        "NaN first");
  forensics->add_option("--remote", forensics_args.remote,
                        "The daemon's TraceService socket (default as for 'sessions'); A,B,...: "
                        "several daemons (a job across nodes)");
  forensics->add_flag("--now", forensics_args.now,
                      "Also take a bundle now from a live session's flight recorder");
  forensics->add_flag("--json", forensics_args.json, "Print the bundles (or the job) as JSON");
  forensics->add_option("--perfetto", forensics_args.perfetto,
                        "Write the flight recorder's ring (every rank's, with --job) as a "
                        "Perfetto/Chrome trace to FILE (ui.perfetto.dev, chrome://tracing)");

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
  if (inspect->parsed()) return RunInspect(inspect_args.Get(), style, env);
  if (summary->parsed()) return RunSummary(summary_args, style, env);
  if (diff->parsed()) {
    return remote_diff.requested() ? RunDiffRemote(diff_args, remote_diff, diff, style, env, daemon)
                                   : RunLocalDiff(diff_args, style, env);
  }
  if (ops_command.parsed()) return ops_command.Run(style, env);
  if (graph_command.parsed()) return graph_command.Run(env);
  if (audit_command.parsed()) return audit_command.Run(env);
#if TRACETORCH_HAVE_REPORT
  if (report_command.parsed()) return report_command.Run(env, daemon);
#endif
  if (watch->parsed()) return RunWatch(watch_args, style, env, daemon);
  const bool for_daemon = baseline_args.baseline->parsed() || sessions->parsed() ||
                          snapshot->parsed() || forensics->parsed();
  if (for_daemon && daemon == nullptr) return kNeedsDaemonClient;
  if (baseline_args.baseline->parsed()) return daemon->Baseline(baseline_args.Get(), env);
  if (sessions->parsed()) return daemon->Sessions(sessions_args, env);
  if (snapshot->parsed()) return daemon->Snapshot(snapshot_args, env);
  if (forensics->parsed()) return daemon->Forensics(forensics_args, style, env);

  *env.err << app.help();
  return kExitUsage;
}

}  // namespace tracetorch::cli
