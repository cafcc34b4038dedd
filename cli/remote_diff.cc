#include "cli/remote_diff.h"

#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "cli/daemon_connect.h"
#include "cli/json_output.h"
#include "cli/report_command.h"
#include "protocol/address.h"
#include "protocol/record_proto.h"
#include "service_client/service_client.h"
#include "trace/json.h"
#include "view/command_io.h"
#include "view/labels.h"
#include "view/render.h"
#include "view/source.h"

namespace tracetorch::cli {

using ::tracetorch::view::CliEnvironment;
using ::tracetorch::view::Fail;
using ::tracetorch::view::FormatUnixTime;
using ::tracetorch::view::kExitOk;
using ::tracetorch::view::LoadTraceFile;
using ::tracetorch::view::PrintLine;
using ::tracetorch::view::ReportDiff;
using ::tracetorch::view::Sanitize;
using ::tracetorch::view::Style;
namespace {

// Diff and SetBaseline may carry whole traces both ways; a generous deadline.
constexpr absl::Duration kUploadDeadline = absl::Seconds(60);

// An operand with what the CLI needs to explain a failure.
struct Operand {
  std::string spelling;
  v1::DiffOperand proto;
  bool bare_session = false;  // Not a file, no "session:" prefix: maybe a mistyped path.
};

bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<Operand> ParseOperand(absl::string_view spelling) {
  Operand out;
  out.spelling = std::string(spelling);
  if (spelling.empty()) return absl::InvalidArgumentError("an operand must not be empty");
  absl::string_view rest = spelling;
  if (absl::ConsumePrefix(&rest, "session:")) {
    if (rest.empty()) {
      return absl::InvalidArgumentError("'session:' needs a session id (or session:latest)");
    }
    out.proto.mutable_session()->set_session_id(std::string(rest));
    return out;
  }
  if (absl::ConsumePrefix(&rest, "baseline:")) {
    if (rest.empty()) return absl::InvalidArgumentError("'baseline:' needs a baseline name");
    out.proto.set_baseline_name(std::string(rest));
    return out;
  }
  const std::string path(spelling);
  if (spelling != "latest" && (IsRegularFile(path) || absl::StrContains(spelling, '/') ||
                               absl::EndsWith(spelling, ".json"))) {
    absl::StatusOr<TraceRecord> record = LoadTraceFile(path);
    if (!record.ok()) return record.status();
    ToProto(*record, out.proto.mutable_record());
    return out;
  }
  out.proto.mutable_session()->set_session_id(path);
  out.bare_session = spelling != "latest";
  return out;
}

// One line for a failed call. `operands` are the sides by the role the daemon names in its
// messages ("baseline: ...", "current: ...", "source: ...").
std::string DescribeError(const absl::Status& status, const std::string& address,
                          const std::vector<std::pair<std::string, const Operand*>>& operands) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return DescribeRemoteError(status, address);
    case absl::StatusCode::kResourceExhausted:
      if (absl::StrContains(status.message(), "message larger than")) {
        return absl::StrCat("the traces are larger than tracetorchd accepts in one call: ",
                            status.message());
      }
      break;
    default:
      break;
  }
  absl::string_view message = status.message();
  absl::ConsumePrefix(&message, "tracetorchd: ");
  if (status.code() != absl::StatusCode::kNotFound) return std::string(message);
  for (const auto& [role, operand] : operands) {
    absl::string_view rest = message;
    if (!absl::ConsumePrefix(&rest, role) || !absl::ConsumePrefix(&rest, ": ")) continue;
    if (absl::StrContains(rest, "unknown session")) {
      if (operand->bare_session) {
        return absl::StrCat("'", operand->spelling,
                            "' is neither a trace file nor a session tracetorchd knows (see "
                            "'tracetorch sessions')");
      }
      return absl::StrCat(rest, " (see 'tracetorch sessions')");
    }
    if (absl::StrContains(rest, "no baseline named")) {
      return absl::StrCat(rest, " (see 'tracetorch baseline list')");
    }
    return std::string(rest);
  }
  return std::string(message);
}

std::string BaselinesToText(const v1::ListBaselinesResponse& list) {
  if (list.baselines_size() == 0) return "no baselines\n";
  std::string out = absl::StrFormat("%-24s %-20s %6s %-7s %-20s %s\n", "NAME", "MODEL", "LAYERS",
                                    "HISTORY", "CREATED", "SOURCE");
  for (const v1::BaselineInfo& b : list.baselines()) {
    absl::StrAppendFormat(&out, "%-24s %-20s %6d %-7s %-20s %s\n", Sanitize(b.name()),
                          b.model_name().empty() ? std::string("-") : Sanitize(b.model_name()),
                          b.layers(), b.has_history() ? "yes" : "no",
                          FormatUnixTime(b.created_unix_ns()), Sanitize(b.source()));
  }
  return out;
}

}  // namespace

absl::StatusOr<v1::DiffOperand> ParseRemoteOperand(absl::string_view spelling) {
  absl::StatusOr<Operand> operand = ParseOperand(spelling);
  if (!operand.ok()) return operand.status();
  return std::move(operand->proto);
}

// ---- diff --remote ------------------------------------------------------------------------------

int RunRemoteDiff(const RemoteDiffRequest& request, const Style& style, const CliEnvironment& env) {
  const std::string address =
      request.address.empty() ? protocol::DefaultServiceAddress() : request.address;
  if (absl::Status s = request.thresholds.Validate(); !s.ok()) {
    return Fail(env, std::string(s.message()));
  }
  absl::StatusOr<Operand> base_op = ParseOperand(request.baseline);
  if (!base_op.ok()) return Fail(env, std::string(base_op.status().message()));
  absl::StatusOr<Operand> cur_op = ParseOperand(request.current);
  if (!cur_op.ok()) return Fail(env, std::string(cur_op.status().message()));

  absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> rpc =
      ConnectToDaemon(address, kUploadDeadline);
  if (!rpc.ok()) return Fail(env, std::string(rpc.status().message()));
  v1::DiffRequest diff_request;
  *diff_request.mutable_baseline() = base_op->proto;
  *diff_request.mutable_current() = cur_op->proto;
  diff_request.set_latency_threshold(request.thresholds.latency);
  diff_request.set_grad_norm_threshold(request.thresholds.grad_norm);
  diff_request.set_std_threshold(request.thresholds.std);
  diff_request.set_include_operands(!request.html.empty());
  absl::StatusOr<v1::DiffResponse> response = (*rpc)->Diff(diff_request);
  if (!response.ok()) {
    return Fail(env, DescribeError(response.status(), address,
                                   {{"baseline", &*base_op}, {"current", &*cur_op}}));
  }
  const TraceDiff diff = FromProto(response->diff());
  const int code = ReportDiff(diff, request.json, style, env);
  if (request.html.empty()) return code;
  // The sides as the daemon resolved them, with their per-step histories (sessions, baselines
  // made from sessions).
  const TraceRecord base = FromProto(response->baseline().record());
  const TraceRecord cur = FromProto(response->current().record());
  const StepHistory base_history = StepHistoryFromProto(response->baseline().history());
  const StepHistory cur_history = StepHistoryFromProto(response->current().history());
  const int written =
      WriteDiffHtml(request.html,
                    {.diff = &diff,
                     .baseline = {&base, &base_history, response->baseline_description()},
                     .current = {&cur, &cur_history, response->current_description()},
                     .thresholds = request.thresholds,
                     .exit_status = code},
                    env);
  return written != kExitOk ? written : code;
}

// ---- baseline set|list|rm ----------------------------------------------------------------------

int RunBaseline(const BaselineRequest& request, const CliEnvironment& env) {
  using Action = BaselineRequest::Action;
  const std::string address =
      request.remote.empty() ? protocol::DefaultServiceAddress() : request.remote;
  absl::StatusOr<Operand> source;
  if (request.action == Action::kSet) {
    source = ParseOperand(request.source);
    if (!source.ok()) return Fail(env, std::string(source.status().message()));
  }
  absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> rpc =
      ConnectToDaemon(address, kUploadDeadline);
  if (!rpc.ok()) return Fail(env, std::string(rpc.status().message()));

  switch (request.action) {
    case Action::kSet: {
      absl::StatusOr<v1::BaselineInfo> info = (*rpc)->SetBaseline(request.name, source->proto);
      if (!info.ok()) {
        return Fail(env, DescribeError(info.status(), address, {{"source", &*source}}));
      }
      PrintLine(absl::StrCat("baseline '", Sanitize(info->name()), "' set from ",
                             Sanitize(info->source()), ": ",
                             info->model_name().empty() ? "-" : Sanitize(info->model_name()), ", ",
                             info->layers(), info->layers() == 1 ? " layer" : " layers",
                             info->has_history() ? ", with per-step history" : ", no history"),
                env);
      return kExitOk;
    }
    case Action::kList: {
      absl::StatusOr<v1::ListBaselinesResponse> list = (*rpc)->ListBaselines();
      if (!list.ok()) return Fail(env, DescribeError(list.status(), address, {}));
      PrintLine(request.json ? BaselinesToJson(*list) : BaselinesToText(*list), env);
      return kExitOk;
    }
    case Action::kRemove:
      break;
  }
  absl::Status removed = (*rpc)->RemoveBaseline(request.name);
  if (!removed.ok()) {
    if (removed.code() == absl::StatusCode::kNotFound) {
      return Fail(env, absl::StrCat("no baseline named '", request.name,
                                    "' (see 'tracetorch baseline list')"));
    }
    return Fail(env, DescribeError(removed, address, {}));
  }
  PrintLine(absl::StrCat("removed baseline '", request.name, "'"), env);
  return kExitOk;
}

}  // namespace tracetorch::cli
