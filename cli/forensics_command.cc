#include "cli/forensics_command.h"

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/daemon_connect.h"
#include "cli/fleet_sessions.h"
#include "cli/forensics_view.h"
#include "cli/job_forensics.h"
#include "cli/multi_job_watch.h"
#include "cli/perfetto_export.h"
#include "google/protobuf/util/json_util.h"
#include "protocol/address.h"
#include "service_client/service_client.h"
#include "trace/atomic_file.h"
#include "view/command_io.h"

namespace tracetorch::cli {

using ::tracetorch::view::CliEnvironment;
using ::tracetorch::view::Fail;
using ::tracetorch::view::kExitOk;
using ::tracetorch::view::kExitUsage;
using ::tracetorch::view::Note;
using ::tracetorch::view::PrintLine;
using ::tracetorch::view::Style;
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(10);

std::string ProtoJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

std::string Describe(const absl::Status& status, const std::string& address) {
  if (status.code() == absl::StatusCode::kUnimplemented) {
    return absl::StrCat("tracetorchd at ", address,
                        " has no forensics (it is older than the flight recorder)");
  }
  return DescribeRemoteError(status, address);
}

absl::StatusOr<v1::ForensicsResponse> FetchForensics(const std::string& address,
                                                     const std::string& session, bool now) {
  absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> rpc =
      ConnectToDaemon(address, kDeadline);
  if (!rpc.ok()) return rpc.status();
  absl::StatusOr<v1::ForensicsResponse> r = (*rpc)->GetForensics(session, now);
  if (!r.ok()) return absl::Status(r.status().code(), Describe(r.status(), address));
  return r;
}

int WritePerfetto(const std::string& path, const std::vector<PerfettoProcess>& processes,
                  const CliEnvironment& env) {
  if (absl::Status s = WriteFileAtomic(path, PerfettoTrace(processes)); !s.ok()) {
    return Fail(env, absl::StrCat(path, ": ", s.message()));
  }
  Note(env, absl::StrCat("wrote ", path, " (open it in ui.perfetto.dev or chrome://tracing)"));
  return kExitOk;
}

int SessionForensics(const ForensicsRequest& request, std::vector<std::string> addresses,
                     const Style& style, const CliEnvironment& env) {
  std::string address = addresses.front();
  std::string session = request.session.empty() ? "latest" : request.session;
  if (addresses.size() > 1) {
    absl::StatusOr<SessionLocation> where = FindSessionOnDaemons(
        ListSessionsOnDaemons(addresses, absl::Seconds(5), ConnectToDaemon), session);
    if (!where.ok()) return Fail(env, std::string(where.status().message()));
    address = where->address;
    session = where->session_id;
  }
  absl::StatusOr<v1::ForensicsResponse> r = FetchForensics(address, session, request.now);
  if (!r.ok()) {
    if (r.status().code() == absl::StatusCode::kNotFound) {
      return Fail(env, absl::StrCat("unknown session '", session, "' (see 'tracetorch sessions')"));
    }
    return Fail(env, std::string(r.status().message()));
  }
  if (request.json) {
    PrintLine(ProtoJson(*r), env);
  } else {
    ForensicsViewOptions options;
    options.style = style;
    *env.out << RenderForensics(*r, options);
    env.out->flush();
  }
  if (!request.perfetto.empty()) {
    if (r->bundles().empty()) return Fail(env, "no bundle to export (--now takes one)");
    const v1::ForensicBundle& b = r->bundles(r->bundles_size() - 1);
    const v1::ProcessIdentity& id = b.snapshot().session().identity();
    return WritePerfetto(request.perfetto,
                         {{absl::StrCat(id.has_rank() ? absl::StrCat("rank ", id.rank(), " ") : "",
                                        "(pid ", id.pid(), ")"),
                           id.has_rank() ? id.rank() : id.pid(), &b}},
                         env);
  }
  return kExitOk;
}

int JobForensics(const ForensicsRequest& request, const std::vector<std::string>& addresses,
                 const Style& style, const CliEnvironment& env) {
  // Every daemon at once.
  std::vector<absl::StatusOr<v1::JobResponse>> answers(addresses.size(),
                                                       absl::UnknownError("not asked"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < addresses.size(); ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> rpc =
          ConnectToDaemon(addresses[i], kDeadline);
      if (!rpc.ok()) {
        answers[i] = rpc.status();
        return;
      }
      answers[i] = (*rpc)->GetJob(request.job_id);
      if (answers[i].status().code() != absl::StatusCode::kUnimplemented) return;
      // A daemon older than GetJob: its sessions of the job (no flight status).
      absl::StatusOr<v1::ListSessionsResponse> list = (*rpc)->ListSessions(request.job_id);
      if (!list.ok()) return;
      v1::JobResponse job;
      for (const v1::SessionInfo& s : list->sessions()) *job.add_ranks()->mutable_session() = s;
      answers[i] = std::move(job);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<v1::JobRank> ranks;
  std::vector<std::string> errors;
  for (size_t i = 0; i < addresses.size(); ++i) {
    if (!answers[i].ok()) {
      errors.push_back(Describe(answers[i].status(), addresses[i]));
      continue;
    }
    for (v1::JobRank& r : *answers[i]->mutable_ranks()) {
      if (r.daemon().empty()) r.set_daemon(addresses[i]);
      ranks.push_back(std::move(r));
    }
  }
  if (errors.size() == addresses.size()) {
    for (const std::string& e : errors) Fail(env, e);
    return kExitUsage;
  }
  ranks = LatestPerRank(std::move(ranks));
  const JobFindings findings = AnalyzeJob(ranks);
  if (request.json) {
    v1::JobResponse all;
    all.set_job_id(request.job_id);
    for (const v1::JobRank& r : ranks) *all.add_ranks() = r;
    std::string json = ProtoJson(all);
    // The findings, as indexes into "ranks" (null: none).
    json.pop_back();
    absl::StrAppend(
        &json, ",\"first_stopped\":",
        findings.first_stopped ? absl::StrCat(*findings.first_stopped) : "null",
        ",\"first_nan\":", findings.first_nan ? absl::StrCat(*findings.first_nan) : "null", "}");
    PrintLine(json, env);
  } else {
    *env.out << RenderJobForensics(request.job_id, ranks, findings, style,
                                   absl::GetCurrentTimeNanos());
    env.out->flush();
  }
  int code = kExitOk;
  for (const std::string& e : errors) code = Fail(env, e);
  if (!request.perfetto.empty()) {
    std::vector<v1::ForensicsResponse> fetched;
    fetched.reserve(ranks.size());
    std::vector<PerfettoProcess> processes;
    for (const v1::JobRank& r : ranks) {
      absl::StatusOr<v1::ForensicsResponse> f =
          FetchForensics(r.daemon(), r.session().session_id(), /*now=*/true);
      if (!f.ok()) {
        code = Fail(env, std::string(f.status().message()));
        continue;
      }
      if (f->bundles().empty()) continue;
      fetched.push_back(*std::move(f));
    }
    for (const v1::ForensicsResponse& f : fetched) {
      const v1::ForensicBundle& b = f.bundles(f.bundles_size() - 1);
      const v1::ProcessIdentity& id = b.snapshot().session().identity();
      processes.push_back({absl::StrCat("rank ", id.has_rank() ? absl::StrCat(id.rank()) : "?",
                                        " (pid ", id.pid(), ")"),
                           id.has_rank() ? id.rank() : id.pid(), &b});
    }
    if (int w = WritePerfetto(request.perfetto, processes, env); w != kExitOk) code = w;
  }
  return code;
}

}  // namespace

int RunForensics(const ForensicsRequest& request, const Style& style, const CliEnvironment& env) {
  const std::string remote =
      request.remote.empty() ? protocol::DefaultServiceAddress() : request.remote;
  const std::vector<std::string> addresses = SplitRemoteAddresses(remote);
  if (addresses.empty()) return Fail(env, "--remote names no daemon");
  if (!request.job_id.empty()) {
    if (!request.session.empty()) return Fail(env, "give a SESSION or --job JOB, not both");
    return JobForensics(request, addresses, style, env);
  }
  return SessionForensics(request, addresses, style, env);
}

}  // namespace tracetorch::cli
