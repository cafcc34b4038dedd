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
#include "cli/command_io.h"
#include "cli/json_output.h"
#include "cli/labels.h"
#include "cli/render.h"
#include "cli/source.h"
#include "protocol/address.h"
#include "protocol/record_proto.h"
#include "service_client/service_client.h"
#include "trace/json.h"

namespace tracetorch::cli {
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

int ReportDiff(const TraceDiff& diff, bool json, const Style& style, const CliEnvironment& env) {
  if (json) {
    PrintLine(DiffToJson(diff), env);
  } else {
    *env.out << RenderDiff(diff, style);
    env.out->flush();
  }
  return diff.has_regressions() ? kExitRegressions : kExitOk;
}

absl::StatusOr<v1::DiffOperand> ParseRemoteOperand(absl::string_view spelling) {
  absl::StatusOr<Operand> operand = ParseOperand(spelling);
  if (!operand.ok()) return operand.status();
  return std::move(operand->proto);
}

// ---- diff --remote
// -------------------------------------------------------------------------------

RemoteDiffCommand::RemoteDiffCommand(CLI::App* diff) : diff_(diff) {
  remote_ = diff->add_option(
                    "--remote", address_,
                    "Diff on tracetorchd: operands may be session:ID, latest, baseline:NAME or a "
                    "trace file (uploaded); ADDR is optional (default: as for 'sessions')")
                ->expected(0, 1)
                ->type_name("[ADDR]");
}

bool RemoteDiffCommand::requested() const { return remote_->count() > 0; }

int RemoteDiffCommand::Run(const std::string& baseline, const std::string& current,
                           const DiffThresholds& thresholds, bool json, const Style& style,
                           const CliEnvironment& env) const {
  std::string address = address_;
  std::string a = baseline;
  std::string b = current;
  if (b.empty()) {
    // `--remote A B`: the option took A as its address. Put it back where it was written.
    if (address.empty() || a.empty()) {
      return Fail(env,
                  "diff --remote needs two operands: BASELINE CURRENT (see 'tracetorch diff "
                  "--help')");
    }
    bool remote_first = false;
    for (const CLI::Option* o : diff_->parse_order()) {
      if (o == remote_) {
        remote_first = true;
        break;
      }
      if (o->get_name() == "baseline") break;
    }
    if (remote_first) {
      b = std::move(a);
      a = std::move(address);
    } else {
      b = std::move(address);
    }
    address.clear();
  }
  if (address.empty()) address = protocol::DefaultServiceAddress();
  if (absl::Status s = thresholds.Validate(); !s.ok()) return Fail(env, std::string(s.message()));

  absl::StatusOr<Operand> base_op = ParseOperand(a);
  if (!base_op.ok()) return Fail(env, std::string(base_op.status().message()));
  absl::StatusOr<Operand> cur_op = ParseOperand(b);
  if (!cur_op.ok()) return Fail(env, std::string(cur_op.status().message()));

  absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> rpc =
      ConnectToDaemon(address, kUploadDeadline);
  if (!rpc.ok()) return Fail(env, std::string(rpc.status().message()));
  v1::DiffRequest request;
  *request.mutable_baseline() = base_op->proto;
  *request.mutable_current() = cur_op->proto;
  request.set_latency_threshold(thresholds.latency);
  request.set_grad_norm_threshold(thresholds.grad_norm);
  request.set_std_threshold(thresholds.std);
  absl::StatusOr<v1::DiffResponse> response = (*rpc)->Diff(request);
  if (!response.ok()) {
    return Fail(env, DescribeError(response.status(), address,
                                   {{"baseline", &*base_op}, {"current", &*cur_op}}));
  }
  return ReportDiff(FromProto(response->diff()), json, style, env);
}

// ---- baseline set|list|rm ----------------------------------------------------------------------

BaselineCommand::BaselineCommand(CLI::App* app) {
  baseline_ = app->add_subcommand(
      "baseline", "Named reference traces kept by tracetorchd, for 'diff --remote baseline:NAME'");
  baseline_->require_subcommand(1);
  const std::string remote_help =
      "The daemon's TraceService socket or HOST:PORT (default: as for 'sessions')";

  set_ = baseline_->add_subcommand(
      "set", "Store (or replace) a baseline from a session, another baseline or a trace file");
  set_->add_option("name", name_, "Baseline name: letters, digits, '.', '_', '-'")->required();
  set_->add_option("source", source_,
                   "session:ID, latest, baseline:NAME, a trace file, or a session id")
      ->required();
  set_->add_option("--remote", remote_, remote_help);

  list_ = baseline_->add_subcommand("list", "List the baselines");
  list_->add_flag("--json", json_, "Print the baselines as JSON");
  list_->add_option("--remote", remote_, remote_help);

  rm_ = baseline_->add_subcommand("rm", "Remove a baseline");
  rm_->add_option("name", name_, "Baseline name")->required();
  rm_->add_option("--remote", remote_, remote_help);
}

bool BaselineCommand::parsed() const { return baseline_->parsed(); }

int BaselineCommand::Run(const CliEnvironment& env) const {
  const std::string address = remote_.empty() ? protocol::DefaultServiceAddress() : remote_;
  absl::StatusOr<Operand> source;
  if (set_->parsed()) {
    source = ParseOperand(source_);
    if (!source.ok()) return Fail(env, std::string(source.status().message()));
  }
  absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> rpc =
      ConnectToDaemon(address, kUploadDeadline);
  if (!rpc.ok()) return Fail(env, std::string(rpc.status().message()));

  if (set_->parsed()) {
    absl::StatusOr<v1::BaselineInfo> info = (*rpc)->SetBaseline(name_, source->proto);
    if (!info.ok()) {
      return Fail(env, DescribeError(info.status(), address, {{"source", &*source}}));
    }
    PrintLine(
        absl::StrCat("baseline '", Sanitize(info->name()), "' set from ", Sanitize(info->source()),
                     ": ", info->model_name().empty() ? "-" : Sanitize(info->model_name()), ", ",
                     info->layers(), info->layers() == 1 ? " layer" : " layers",
                     info->has_history() ? ", with per-step history" : ", no history"),
        env);
    return kExitOk;
  }
  if (list_->parsed()) {
    absl::StatusOr<v1::ListBaselinesResponse> list = (*rpc)->ListBaselines();
    if (!list.ok()) return Fail(env, DescribeError(list.status(), address, {}));
    PrintLine(json_ ? BaselinesToJson(*list) : BaselinesToText(*list), env);
    return kExitOk;
  }
  absl::Status removed = (*rpc)->RemoveBaseline(name_);
  if (!removed.ok()) {
    if (removed.code() == absl::StatusCode::kNotFound) {
      return Fail(env,
                  absl::StrCat("no baseline named '", name_, "' (see 'tracetorch baseline list')"));
    }
    return Fail(env, DescribeError(removed, address, {}));
  }
  PrintLine(absl::StrCat("removed baseline '", name_, "'"), env);
  return kExitOk;
}

}  // namespace tracetorch::cli
