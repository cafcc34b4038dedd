#include "cli/remote_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "cli/daemon_connect.h"
#include "cli/fleet_sessions.h"
#include "cli/forensics_command.h"
#include "cli/json_output.h"
#include "cli/multi_job_watch.h"
#include "cli/remote_diff.h"
#include "cli/remote_watch.h"
#include "cli/session_labels.h"
#include "protocol/address.h"
#include "protocol/record_proto.h"
#include "service_client/service_client.h"
#include "trace/json.h"
#include "view/command_io.h"
#include "view/labels.h"
#include "view/terminal.h"
#include "view/watch.h"

namespace tracetorch::cli {

using ::tracetorch::view::CliEnvironment;
using ::tracetorch::view::Fail;
using ::tracetorch::view::FormatUnixTime;
using ::tracetorch::view::kExitOk;
using ::tracetorch::view::MakeSignalWaiter;
using ::tracetorch::view::PrintLine;
using ::tracetorch::view::QueryTerminalSize;
using ::tracetorch::view::Sanitize;
using ::tracetorch::view::Style;
using ::tracetorch::view::Waiter;
namespace {

// The daemon's TraceService: `remote`, else the RPC socket next to the agents' socket.
std::string ServiceAddress(const std::string& remote) {
  return remote.empty() ? protocol::DefaultServiceAddress() : remote;
}

// With `daemons` (several daemons): a DAEMON column first, daemons[i] for session i.
std::string SessionsToText(const v1::ListSessionsResponse& list,
                           const std::vector<std::string>& daemons = {}) {
  if (list.sessions_size() == 0) return "no sessions\n";
  size_t daemon_width = 6;
  for (const std::string& d : daemons) daemon_width = std::max(daemon_width, Sanitize(d).size());
  const auto daemon_column = [&](std::string_view name) {
    return daemons.empty() ? std::string()
                           : absl::StrFormat("%-*s ", static_cast<int>(daemon_width), name);
  };
  const int64_t now = absl::GetCurrentTimeNanos();
  std::string out = absl::StrCat(
      daemon_column("DAEMON"),
      absl::StrFormat("%-44s %-9s %8s %5s %-20s %-20s %10s %8s  %s\n", "SESSION", "STATE", "PID",
                      "RANK", "MODEL", "STARTED", "EVENTS", "DROPPED", "WHERE"));
  for (int i = 0; i < list.sessions_size(); ++i) {
    const v1::SessionInfo& s = list.sessions(i);
    const v1::ProcessIdentity& id = s.identity();
    const size_t at = static_cast<size_t>(i);
    // Where the process is (live), or how it ended (aborted): its flight recorder's view.
    const std::string where =
        s.state() == v1::SESSION_STATE_FINISHED ? "" : Sanitize(FlightText(s, now));
    absl::StrAppend(&out, daemon_column(at < daemons.size() ? Sanitize(daemons[at]) : ""));
    absl::StrAppendFormat(&out, "%-44s %-9s %8d %5s %-20s %-20s %10d %8d  %s\n",
                          Sanitize(s.session_id()), SessionStateName(s), id.pid(),
                          id.has_rank() ? absl::StrCat(id.rank()) : std::string("-"),
                          id.model_name().empty() ? std::string("-") : Sanitize(id.model_name()),
                          FormatUnixTime(s.started_unix_ns()), s.events(), s.dropped_events(),
                          where.empty() ? "-" : where);
  }
  return out;
}

// `sessions --remote A,B,...`: every daemon's sessions in one listing. A daemon that does not
// answer gets an error line, and the exit code says the listing is incomplete.
int FleetSessions(const std::vector<std::string>& addresses, bool json, const CliEnvironment& env) {
  const MergedListing merged =
      MergeListings(ListSessionsOnDaemons(addresses, absl::Seconds(5), ConnectToDaemon));
  if (merged.errors.size() == addresses.size()) {
    // Nothing answered: no listing at all, only the errors.
  } else if (json) {
    PrintLine(SessionsToJson(merged.sessions, merged.daemons), env);
  } else {
    *env.out << SessionsToText(merged.sessions, merged.daemons);
    env.out->flush();
  }
  int code = kExitOk;
  for (const std::string& error : merged.errors) code = Fail(env, error);
  return code;
}

}  // namespace

int GrpcDaemonCommands::Sessions(const SessionsRequest& request, const CliEnvironment& env) const {
  const std::string address = ServiceAddress(request.remote);
  if (std::vector<std::string> addresses = SplitRemoteAddresses(address); addresses.size() > 1) {
    return FleetSessions(addresses, request.json, env);
  }
  absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> rpc =
      ConnectToDaemon(address, absl::Seconds(5));
  if (!rpc.ok()) return Fail(env, std::string(rpc.status().message()));
  absl::StatusOr<v1::ListSessionsResponse> list = (*rpc)->ListSessions();
  if (!list.ok()) return Fail(env, DescribeRemoteError(list.status(), address));
  if (request.json) {
    PrintLine(SessionsToJson(*list), env);
  } else {
    *env.out << SessionsToText(*list);
    env.out->flush();
  }
  return kExitOk;
}

namespace {

// The session's snapshot from the daemon at `remote` (several: the one that lists it). The error's
// message is the line to print.
absl::StatusOr<v1::Snapshot> GetSessionSnapshot(const std::string& remote,
                                                const std::string& requested) {
  std::string address = ServiceAddress(remote);
  if (requested.empty()) {
    return absl::InvalidArgumentError("SESSION must not be empty (an id or 'latest')");
  }
  // Several daemons: the one that lists the session is asked for it.
  std::string session = requested;
  if (std::vector<std::string> addresses = SplitRemoteAddresses(address); addresses.size() > 1) {
    absl::StatusOr<SessionLocation> where = FindSessionOnDaemons(
        ListSessionsOnDaemons(addresses, absl::Seconds(5), ConnectToDaemon), requested);
    if (!where.ok()) return where.status();
    address = where->address;
    session = where->session_id;
  }
  absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> rpc =
      ConnectToDaemon(address, absl::Seconds(5));
  if (!rpc.ok()) return rpc.status();
  absl::StatusOr<v1::Snapshot> snapshot = (*rpc)->GetSnapshot(session);
  if (!snapshot.ok()) {
    if (snapshot.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(
          absl::StrCat("unknown session '", requested, "' (see 'tracetorch sessions')"));
    }
    return absl::Status(snapshot.status().code(), DescribeRemoteError(snapshot.status(), address));
  }
  return snapshot;
}

}  // namespace

int GrpcDaemonCommands::Snapshot(const SnapshotRequest& request, const CliEnvironment& env) const {
  absl::StatusOr<v1::Snapshot> snapshot = GetSessionSnapshot(request.remote, request.session);
  if (!snapshot.ok()) return Fail(env, std::string(snapshot.status().message()));
  const TraceRecord record = FromProto(snapshot->record());
  if (request.output.empty()) {
    PrintLine(TraceToJson(record), env);
    return kExitOk;
  }
  if (absl::Status s = WriteTraceFile(request.output, record); !s.ok()) {
    return Fail(env, absl::StrCat(request.output, ": ", s.message()));
  }
  return kExitOk;
}

absl::StatusOr<FetchedTrace> GrpcDaemonCommands::Fetch(const FetchRequest& request) const {
  absl::StatusOr<v1::Snapshot> snapshot = GetSessionSnapshot(request.remote, request.session);
  if (!snapshot.ok()) return snapshot.status();
  FetchedTrace out;
  out.record = FromProto(snapshot->record());
  out.history = StepHistoryFromProto(snapshot->history());
  out.description = absl::StrCat("session ", snapshot->session().session_id());
  return out;
}

int GrpcDaemonCommands::Diff(const RemoteDiffRequest& request, const Style& style,
                             const CliEnvironment& env) const {
  return RunRemoteDiff(request, style, env);
}

int GrpcDaemonCommands::Baseline(const BaselineRequest& request, const CliEnvironment& env) const {
  return RunBaseline(request, env);
}

int GrpcDaemonCommands::Watch(const RemoteWatchRequest& request, const Style& style,
                              const CliEnvironment& env) const {
  if (!std::isfinite(request.connect_timeout_s) || request.connect_timeout_s < 0 ||
      request.connect_timeout_s > 3600) {
    return Fail(env, absl::StrCat("--connect-timeout must be a number of seconds in [0, 3600], "
                                  "got ",
                                  request.connect_timeout_s));
  }
  absl::StatusOr<RemoteWatchTarget> target = ResolveRemoteWatchTarget(RemoteWatchArgs{
      .remote_value = request.remote_value,
      .targets = request.targets,
      .job_id = request.job_id,
      .default_address = protocol::DefaultServiceAddress(),
  });
  if (!target.ok()) return Fail(env, std::string(target.status().message()));
  // Several daemons (--remote A,B,...): a job whose ranks run on several nodes.
  if (std::vector<std::string> addresses = SplitRemoteAddresses(target->address);
      addresses.size() > 1) {
    if (target->job_id.empty()) {
      return Fail(env, "watch --remote A,B,... needs --job JOB: a session lives on one daemon");
    }
    MultiJobWatchOptions multi;
    multi.addresses = std::move(addresses);
    multi.job_id = target->job_id;
    multi.interval = absl::Seconds(request.interval_s.value_or(0.5));
    multi.json = request.json;
    multi.redraw_in_place = env.stdout_is_tty && !request.json;
    multi.view.style = request.json ? Style::Plain() : style;
    multi.view.filter = request.filter;
    multi.terminal_size = [] { return QueryTerminalSize(STDOUT_FILENO); };
    const Waiter wait = env.wait ? env.wait : MakeSignalWaiter();
    absl::Status s = RunMultiJobWatchCommand(std::move(multi), env.out, wait);
    if (!s.ok()) return Fail(env, std::string(s.message()));
    return kExitOk;
  }
  RemoteWatchOptions options;
  options.interval = absl::Seconds(request.interval_s.value_or(0.5));
  options.json = request.json;
  options.redraw_in_place = env.stdout_is_tty && !request.json;
  options.view.style = request.json ? Style::Plain() : style;
  options.view.filter = request.filter;
  options.terminal_size = [] { return QueryTerminalSize(STDOUT_FILENO); };
  options.connect_timeout = absl::Seconds(request.connect_timeout_s);
  // The signal mask first: the gRPC threads started next inherit it.
  const Waiter wait = env.wait ? env.wait : MakeSignalWaiter();
  absl::Status s = RunRemoteWatchCommand(*target, std::move(options), env.out, wait);
  if (!s.ok()) return Fail(env, std::string(s.message()));
  return kExitOk;
}

int GrpcDaemonCommands::Forensics(const ForensicsRequest& request, const Style& style,
                                  const CliEnvironment& env) const {
  return RunForensics(request, style, env);
}

int RunTracetorch(int argc, const char* const* argv, const CliEnvironment& env) {
  const GrpcDaemonCommands daemon;
  return RunTracetorchCommand(argc, argv, env, &daemon);
}

}  // namespace tracetorch::cli
