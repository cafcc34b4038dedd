// The job view's cost with many ranks, through the fleet store (daemon/core/fleet_registry.h):
//
//   job_view_bench [RANKS] [DAEMONS] [ROUNDS]      (default 256 ranks over 32 daemons, 7 rounds)
//
// starts a real PostgreSQL server (daemon/store_pg/postgres_server.h) and a real tracetorchd over
// it (--service-only --store), then simulates DAEMONS daemons each registering RANKS / DAEMONS
// ranks of one job (one PgFleetRegistry connection each, as a daemon's publisher thread does: one
// transaction of its rows); rank 137 (or the middle rank) stopped first. It measures, median
// (min-max) over ROUNDS:
//   publish   one round of every simulated daemon publishing its rows
//   GetJob    the RPC answered from the store (in-process service client)
//   view      `tracetorch forensics --job J --remote DAEMON --json`, the whole command as a person
//             runs it: process start, connect, GetJob, analysis, JSON out
// and checks that the view names the rank that stopped first.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/server/daemon.h"
#include "daemon/store_pg/pg_fleet_registry.h"
#include "daemon/store_pg/postgres_server.h"
#include "service_client/service_client.h"
#include "tracetorch/v1/service.pb.h"

extern char** environ;

namespace {

using tracetorch::daemon::FleetRank;
using tracetorch::daemon::PgFleetRegistry;
namespace v1 = tracetorch::v1;

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

std::string Summary(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  char out[128];
  std::snprintf(out, sizeof(out), "%.1f ms (%.1f-%.1f)", v[v.size() / 2], v.front(), v.back());
  return out;
}

std::string Info(int rank, int first, int64_t now_ns) {
  v1::SessionInfo s;
  s.set_session_id(absl::StrCat("20261201T000000Z-node", rank / 8, "-", 1000 + rank, "-1-x"));
  s.set_state(v1::SESSION_STATE_LIVE);
  s.set_started_unix_ns(now_ns - 3'600'000'000'000);
  s.set_events(1'000'000);
  v1::ProcessIdentity* id = s.mutable_identity();
  id->set_pid(1000 + rank);
  id->set_host(absl::StrCat("node", rank / 8));
  id->set_rank(rank);
  id->set_job_id("bench-job");
  id->set_model_name("Transformer");
  v1::FlightStatus* f = s.mutable_flight();
  f->set_recorder(true);
  f->set_stalled(true);
  f->set_step(1042);
  f->set_phase(rank == first ? "forward" : "backward");
  f->set_layer(rank == first ? "encoder.layers.5.attn" : "encoder.layers.0");
  f->set_position(absl::StrCat("step 1042, ", f->phase(), ", in ", f->layer()));
  // Every rank stopped within 2 s; `first` 50 ms before the earliest of the others.
  f->set_since_unix_ns(now_ns - 60'000'000'000 + (rank == first ? -50'000'000 : rank * 7'000'000));
  f->set_moved_unix_ns(f->since_unix_ns());
  f->set_stalled_since_unix_ns(now_ns);
  return s.SerializeAsString();
}

// Runs argv with stdout into `out`; returns the exit code.
int Run(const std::vector<std::string>& argv, std::string* out) {
  char path[] = "/tmp/job_view_bench_XXXXXX";
  const int fd = mkstemp(path);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int status = -1;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) == 0) {
    waitpid(pid, &status, 0);
  }
  posix_spawn_file_actions_destroy(&actions);
  close(fd);
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  *out = s.str();
  unlink(path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 256;
  const int daemons = argc > 2 ? std::atoi(argv[2]) : 32;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 7;
  const int first = std::min(137, ranks / 2);
  auto pg = tracetorch::daemon::test_util::PostgresServer::Start();
  if (!pg.ok()) {
    std::fprintf(stderr, "PostgreSQL: %s\n", std::string(pg.status().message()).c_str());
    return 1;
  }
  char dir[] = "/tmp/jvbXXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  tracetorch::daemon::DaemonConfig config;
  config.socket_path = absl::StrCat(dir, "/d.sock");
  config.service_socket_path = absl::StrCat(dir, "/d-rpc.sock");
  config.service_only = true;
  config.store = (*pg)->url();
  auto daemon = tracetorch::daemon::Daemon::Start(config);
  if (!daemon.ok()) {
    std::fprintf(stderr, "tracetorchd: %s\n", std::string(daemon.status().message()).c_str());
    return 1;
  }
  std::vector<std::unique_ptr<PgFleetRegistry>> registries;
  for (int d = 0; d < daemons; ++d) registries.push_back(*PgFleetRegistry::Open((*pg)->url()));

  std::vector<double> publish, get_job, view;
  bool named_first = true;
  auto client = *tracetorch::service_client::TraceServiceClient::Create(config.service_socket_path);
  for (int round = 0; round < rounds; ++round) {
    const int64_t now = absl::GetCurrentTimeNanos();
    auto t0 = std::chrono::steady_clock::now();
    for (int d = 0; d < daemons; ++d) {
      std::vector<FleetRank> rows;
      for (int r = d; r < ranks; r += daemons) {
        rows.push_back(FleetRank{.session_id = absl::StrCat("s", r),
                                 .job_id = "bench-job",
                                 .daemon = absl::StrCat("node", d, ":7171"),
                                 .session_info = Info(r, first, now),
                                 .seen = absl::FromUnixNanos(now)});
      }
      if (absl::Status s = registries[static_cast<size_t>(d)]->Publish(rows); !s.ok()) {
        std::fprintf(stderr, "publish: %s\n", std::string(s.message()).c_str());
        return 1;
      }
    }
    publish.push_back(Ms(std::chrono::steady_clock::now() - t0));
    t0 = std::chrono::steady_clock::now();
    absl::StatusOr<v1::JobResponse> job = client->GetJob("bench-job");
    get_job.push_back(Ms(std::chrono::steady_clock::now() - t0));
    if (!job.ok() || job->ranks_size() != ranks) {
      std::fprintf(stderr, "GetJob: %s (%d ranks)\n", std::string(job.status().message()).c_str(),
                   job.ok() ? job->ranks_size() : -1);
      return 1;
    }
    std::string out;
    t0 = std::chrono::steady_clock::now();
    const int code = Run({TRACETORCH_BINARY, "forensics", "--job", "bench-job", "--remote",
                          config.service_socket_path, "--json"},
                         &out);
    view.push_back(Ms(std::chrono::steady_clock::now() - t0));
    // The rank that stopped first, by index into "ranks" (sorted by rank): `first` itself.
    named_first = named_first && code == 0 &&
                  absl::StrContains(out, absl::StrCat("\"first_stopped\":", first));
  }
  std::printf(
      "job view, %d ranks registered by %d daemons in one fleet store (PostgreSQL), "
      "%d rounds, median (min-max)\n",
      ranks, daemons, rounds);
  std::printf("  publish (every daemon, one transaction each): %s\n", Summary(publish).c_str());
  std::printf("  GetJob from the store (in-process client):     %s\n", Summary(get_job).c_str());
  std::printf("  tracetorch forensics --job --json (whole cmd): %s\n", Summary(view).c_str());
  std::printf("  names rank %d as the first to stop: %s\n", first, named_first ? "yes" : "NO");
  (*daemon)->Shutdown();
  std::string rm = absl::StrCat("rm -rf ", dir);
  (void)!std::system(rm.c_str());
  return named_first ? 0 : 1;
}
