// Live-watch cost and latency: 8 synthetic agents streaming as fast as they can through the real
// client library into the real tracetorchd (a subprocess), with and without 64 real gRPC viewers
// (service_client::TraceServiceClient::Watch, 8 per session, each applying its updates to a
// protocol::WatchState like `tracetorch watch --remote` does), in the same run.
//
// Prints, per run: layer events/s the daemon accepted, the daemon's CPU (cores) and RSS (GetStats);
// with viewers also the updates received (full/delta), their mean size, and states coalesced. Then
// the ratio of the ingest rate with viewers to the mean of the two runs without (one before, one
// after), and two latencies, both from daemon clock to viewer clock on this machine:
//
//   freshness   receive time of an update - arrival at the daemon of the NEWEST event it reflects
//               (WatchUpdate.newest_event_unix_ns): how old the newest data on a viewer's screen
//               is when it arrives; the build + send + receive path.
//   event bound receive time of update k - newest_event_unix_ns of update k-1: every event first
//               reflected in update k arrived at the daemon after that, so this bounds the age of
//               the OLDEST event first shown in update k. It includes waiting for the viewer's
//               next tick, so it is about interval + freshness by construction.
//
// Freshness is split at WatchUpdate.sent_unix_ns (when the daemon built the update) into
//   at build    sent_unix_ns - newest_event_unix_ns: the newest event's age when its update was
//               built: how long before the tick the agent's latest batch arrived (agents send a
//               batch every DaemonClientOptions::flush_interval, 20 ms, so up to that), the wait
//               for the hub's pass and the state copy;
//   transit     receive time - sent_unix_ns: the rest (the hub's other viewers in the same pass,
//               serialisation, gRPC's threads, the socket, the viewer's thread and parse).
//
// Usage: tracetorchd_watch_bench [seconds per run, default 5] [layers per model, default 50]
//                                [viewers, default 64] [interval s, default 0.05]
//                                [steps/s per agent, default 0 = flat out]
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/agent_driver.h"
#include "protocol/watch_state.h"
#include "service_client/service_client.h"
#include "service_client/watch_stream.h"

namespace {

using tracetorch::service_client::TraceServiceClient;

constexpr int kAgents = 8;

struct Sample {
  uint64_t events = 0;
  double cpu = 0;
  uint64_t rss = 0;
  uint64_t coalesced = 0;
};

Sample Probe(TraceServiceClient& svc) {
  const tracetorch::v1::DaemonStats s = tracetorch::bench::StatsOrExit(svc);
  return {s.events_total(), s.cpu_seconds(), s.rss_bytes(), s.watch_updates_coalesced()};
}

// What the viewers saw during the measured window.
struct ViewerTotals {
  absl::Mutex mu;
  std::vector<double> fresh_ms;    // Freshness (see the top).
  std::vector<double> bound_ms;    // Event bound (see the top).
  std::vector<double> build_ms;    // At build (see the top).
  std::vector<double> transit_ms;  // Transit (see the top).
  uint64_t updates = 0, fulls = 0, deltas = 0, bytes = 0, gaps = 0, errors = 0;
};

struct Result {
  double events_per_s = 0;
  double daemon_cores = 0;
  uint64_t rss = 0;
  uint64_t coalesced = 0;
  double dropped_fraction = 0;
};

// Runs kAgents agents flat out; with `viewers` > 0 that many viewers watch their sessions
// (round-robin) at `interval_s`. Measures `seconds` after a warm-up.
Result Run(const std::string& socket, const std::string& rpc, TraceServiceClient& svc, int layers,
           double seconds, int viewers, double interval_s, double steps_per_s,
           ViewerTotals* totals) {
  std::atomic<bool> measuring{false};
  tracetorch::bench::AgentOptions options;
  options.socket = socket;
  options.agents = kAgents;
  options.layers = layers;
  options.steps_per_s = steps_per_s;
  options.close_timeout = absl::Seconds(5);
  tracetorch::bench::SyntheticAgents agents(options);
  const std::vector<std::string> sessions = agents.WaitConnected();

  std::vector<std::thread> viewer_threads;
  for (int v = 0; v < viewers; ++v) {
    viewer_threads.emplace_back([&, v] {
      auto client = TraceServiceClient::Create(rpc);
      if (!client.ok()) std::exit(1);
      tracetorch::v1::WatchRequest request;
      request.mutable_session()->set_session_id(sessions[static_cast<size_t>(v % kAgents)]);
      request.set_interval_s(interval_s);
      std::unique_ptr<tracetorch::service_client::WatchStream> stream = (*client)->Watch(request);
      tracetorch::protocol::WatchState state;
      std::vector<double> fresh, bound, build, transit;
      uint64_t updates = 0, fulls = 0, deltas = 0, bytes = 0, gaps = 0, errors = 0;
      int64_t previous_newest = 0;
      uint64_t previous_sequence = 0;
      tracetorch::v1::WatchUpdate u;
      while (stream->Read(&u)) {
        const int64_t received = absl::ToUnixNanos(absl::Now());
        if (!state.Apply(u).ok()) ++errors;
        if (measuring.load(std::memory_order_relaxed) &&
            (u.kind_case() == tracetorch::v1::WatchUpdate::kFull ||
             u.kind_case() == tracetorch::v1::WatchUpdate::kDelta)) {
          ++updates;
          bytes += u.ByteSizeLong();
          (u.kind_case() == tracetorch::v1::WatchUpdate::kFull ? fulls : deltas)++;
          if (u.sequence() > previous_sequence + 1) ++gaps;
          if (u.newest_event_unix_ns() > 0) {
            fresh.push_back(static_cast<double>(received - u.newest_event_unix_ns()) / 1e6);
            build.push_back(static_cast<double>(u.sent_unix_ns() - u.newest_event_unix_ns()) / 1e6);
            transit.push_back(static_cast<double>(received - u.sent_unix_ns()) / 1e6);
          }
          if (previous_newest > 0) {
            bound.push_back(static_cast<double>(received - previous_newest) / 1e6);
          }
        }
        if (u.newest_event_unix_ns() > 0) previous_newest = u.newest_event_unix_ns();
        previous_sequence = u.sequence();
      }
      if (!stream->Finish().ok()) ++errors;
      absl::MutexLock lock(&totals->mu);
      totals->fresh_ms.insert(totals->fresh_ms.end(), fresh.begin(), fresh.end());
      totals->bound_ms.insert(totals->bound_ms.end(), bound.begin(), bound.end());
      totals->build_ms.insert(totals->build_ms.end(), build.begin(), build.end());
      totals->transit_ms.insert(totals->transit_ms.end(), transit.begin(), transit.end());
      totals->updates += updates;
      totals->fulls += fulls;
      totals->deltas += deltas;
      totals->bytes += bytes;
      totals->gaps += gaps;
      totals->errors += errors;
    });
  }

  absl::SleepFor(absl::Seconds(1));  // Warm up: connections, buffers, the viewers' first states.
  const Sample s0 = Probe(svc);
  const absl::Time t0 = absl::Now();
  measuring = true;
  absl::SleepFor(absl::Seconds(seconds));
  measuring = false;
  const Sample s1 = Probe(svc);
  const double dt = absl::ToDoubleSeconds(absl::Now() - t0);
  const tracetorch::bench::SyntheticAgents::Totals produced = agents.Stop();
  for (auto& t : viewer_threads) t.join();  // The sessions ended: every stream ends.
  Result r;
  r.events_per_s = static_cast<double>(s1.events - s0.events) / dt;
  r.daemon_cores = (s1.cpu - s0.cpu) / dt;
  r.rss = s1.rss;
  r.coalesced = s1.coalesced - s0.coalesced;
  r.dropped_fraction = produced.dropped_fraction();
  return r;
}

void Print(const char* name, const Result& r) {
  std::printf(
      "%-20s %7.3f M layer events/s  agent drops=%5.1f%%  daemon CPU=%4.2f cores  daemon "
      "RSS=%6.1f MiB\n",
      name, r.events_per_s / 1e6, 100 * r.dropped_fraction, r.daemon_cores,
      static_cast<double>(r.rss) / (1 << 20));
  std::fflush(stdout);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 5.0;
  const int layers = argc > 2 ? std::atoi(argv[2]) : 50;
  const int viewers = argc > 3 ? std::atoi(argv[3]) : 64;
  const double interval_s = argc > 4 ? std::atof(argv[4]) : 0.05;
  const double steps_per_s = argc > 5 ? std::atof(argv[5]) : 0.0;
  signal(SIGPIPE, SIG_IGN);
  tracetorch::bench::DaemonProcess daemon(TRACETORCHD_BINARY, "ttwbench");
  const std::string& socket = daemon.socket();
  const std::string& rpc = daemon.rpc_socket();
  auto svc = TraceServiceClient::Create(rpc);
  if (!svc.ok()) return 1;

  std::printf(
      "tracetorchd watch: %d agents x %d layers streaming %s (forward + backward per layer "
      "per step); %d viewers at %.3f s (%d per session, each applying updates to a WatchState); "
      "%.1f s per run; %u cores\n",
      kAgents, layers,
      steps_per_s > 0 ? absl::StrCat(steps_per_s, " steps/s each").c_str() : "flat out", viewers,
      interval_s, viewers / kAgents, seconds, std::thread::hardware_concurrency());
  ViewerTotals none;
  const Result before = Run(socket, rpc, **svc, layers, seconds, 0, interval_s, steps_per_s, &none);
  Print("no viewers", before);
  ViewerTotals totals;
  const Result with =
      Run(socket, rpc, **svc, layers, seconds, viewers, interval_s, steps_per_s, &totals);
  Print(absl::StrCat(viewers, " viewers").c_str(), with);
  const Result after = Run(socket, rpc, **svc, layers, seconds, 0, interval_s, steps_per_s, &none);
  Print("no viewers (again)", after);

  const double without = (before.events_per_s + after.events_per_s) / 2;
  const double ratio = without > 0 ? with.events_per_s / without : 0;
  std::printf(
      "viewers: %llu updates in the window (%.0f/s; full %llu, delta %llu), mean %.1f KiB, "
      "%llu sequence gaps, %llu states coalesced, %llu errors\n",
      static_cast<unsigned long long>(totals.updates),
      static_cast<double>(totals.updates) / seconds, static_cast<unsigned long long>(totals.fulls),
      static_cast<unsigned long long>(totals.deltas),
      totals.updates > 0
          ? static_cast<double>(totals.bytes) / static_cast<double>(totals.updates) / 1024
          : 0.0,
      static_cast<unsigned long long>(totals.gaps), static_cast<unsigned long long>(with.coalesced),
      static_cast<unsigned long long>(totals.errors));
  std::printf("ingest with %d viewers / without: %.3f (target >= 0.90: %s)\n", viewers, ratio,
              ratio >= 0.90 ? "met" : "NOT met");
  std::printf(
      "freshness   (newest event's arrival -> viewer):      p50 %6.1f ms  p99 %6.1f ms  max "
      "%6.1f ms  (target p99 <= 50 ms: %s)\n",
      Percentile(totals.fresh_ms, 0.50), Percentile(totals.fresh_ms, 0.99),
      Percentile(totals.fresh_ms, 1.0),
      Percentile(totals.fresh_ms, 0.99) <= 50 ? "met" : "NOT met");
  std::printf(
      "  at build  (newest event's arrival -> update built):  p50 %6.1f ms  p99 %6.1f ms  max "
      "%6.1f ms\n",
      Percentile(totals.build_ms, 0.50), Percentile(totals.build_ms, 0.99),
      Percentile(totals.build_ms, 1.0));
  std::printf(
      "  transit   (update built -> viewer):                  p50 %6.1f ms  p99 %6.1f ms  max "
      "%6.1f ms\n",
      Percentile(totals.transit_ms, 0.50), Percentile(totals.transit_ms, 0.99),
      Percentile(totals.transit_ms, 1.0));
  std::printf(
      "event bound (oldest new event's arrival -> viewer, <=): p50 %6.1f ms  p99 %6.1f ms  max "
      "%6.1f ms  (includes the wait for the %.0f ms tick)\n",
      Percentile(totals.bound_ms, 0.50), Percentile(totals.bound_ms, 0.99),
      Percentile(totals.bound_ms, 1.0), interval_s * 1000);
  return 0;  // `daemon` stops it.
}
