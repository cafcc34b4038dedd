// Ingest throughput: N synthetic agents using the real client library against the real tracetorchd
// (a subprocess), and two raw-socket runs in the same process against the same daemon:
//   daemon ceiling       one batch encoded before the run and written again and again (every
//                        event at step 0): what the daemon takes with no agent-side cost at all;
//   raw socket baseline  the client library's events (bench/agent_driver.h: the same layers,
//                        fields, steps and order) built, encoded and written by each agent's own
//                        thread, in frames cut as the library cuts them: a client without the
//                        library's queue, lock and sender thread. The like-for-like comparison.
//
// Prints, per configuration: layer events/s the daemon accepted (from GetStats), events dropped by
// the agents (queue full), the daemon's CPU use (cores, and CPU nanoseconds per accepted event),
// this process's (the agents': cores and ns per event) and the daemon's RSS. Then the ratios of
// the client library's rate to the raw baseline's and to the ceiling's. On a machine with fewer
// cores than agents the agents' CPU competes with the daemon's: the rates follow the sum of the
// two per-event costs.
//
// Then, with a soak time, 8 client-library agents stream for that long while the daemon's RSS is
// sampled every 30 s: memory must stay flat (bounded by layers and history, never by steps).
//
// Usage: tracetorchd_ingest_bench [seconds per run, default 3] [layers per model, default 50]
//                                 [soak seconds, default 0 = no soak; 300 for the 5-minute check]
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "bench/agent_driver.h"
#include "client/daemon_client.h"
#include "protocol/wire.h"
#include "service_client/service_client.h"

namespace {

using tracetorch::bench::MakeBackward;
using tracetorch::bench::MakeForward;
using tracetorch::bench::MakeLayers;

struct Sample {
  uint64_t events = 0;
  double cpu = 0;
  uint64_t rss = 0;
};

Sample Probe(tracetorch::service_client::TraceServiceClient& svc) {
  const tracetorch::v1::DaemonStats s = tracetorch::bench::StatsOrExit(svc);
  return {s.events_total(), s.cpu_seconds(), s.rss_bytes()};
}

// CPU time of this process (the agents, whichever kind), user + system.
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Result {
  double events_per_s = 0;
  double dropped_fraction = 0;
  double daemon_cores = 0;
  double agent_cores = 0;  // This process: the agents and their client libraries.
  uint64_t rss = 0;
  std::vector<std::pair<double, uint64_t>> rss_samples;  // (seconds into the run, RSS bytes)
};

// Runs `agents` synthetic agents (bench/agent_driver.h) flat out for `seconds`.
// With `sample_every_s` > 0, also samples the daemon's RSS at that period.
Result RunClients(const std::string& socket, tracetorch::service_client::TraceServiceClient& svc,
                  int agents, int layers, double seconds, double sample_every_s = 0) {
  tracetorch::bench::AgentOptions options;
  options.socket = socket;
  options.agents = agents;
  options.layers = layers;
  tracetorch::bench::SyntheticAgents running(options);
  absl::SleepFor(absl::Milliseconds(500));  // Warm up: connections, buffers.
  const Sample s0 = Probe(svc);
  const double cpu0 = ProcessCpuSeconds();
  const absl::Time t0 = absl::Now();
  Result r;
  const absl::Time end = t0 + absl::Seconds(seconds);
  while (absl::Now() < end) {
    const absl::Duration left = end - absl::Now();
    if (sample_every_s <= 0) {
      absl::SleepFor(left);
      break;
    }
    absl::SleepFor(std::min(left, absl::Seconds(sample_every_s)));
    const Sample s = Probe(svc);
    r.rss_samples.emplace_back(absl::ToDoubleSeconds(absl::Now() - t0), s.rss);
    std::printf("  soak t=%5.0fs  daemon RSS=%6.1f MiB  events=%llu\n", r.rss_samples.back().first,
                static_cast<double>(s.rss) / (1 << 20), static_cast<unsigned long long>(s.events));
    std::fflush(stdout);
  }
  const Sample s1 = Probe(svc);
  const double dt = absl::ToDoubleSeconds(absl::Now() - t0);
  const double cpu1 = ProcessCpuSeconds();
  const tracetorch::bench::SyntheticAgents::Totals totals = running.Stop();
  r.events_per_s = static_cast<double>(s1.events - s0.events) / dt;
  r.dropped_fraction = totals.dropped_fraction();
  r.daemon_cores = (s1.cpu - s0.cpu) / dt;
  r.agent_cores = (cpu1 - cpu0) / dt;
  r.rss = s1.rss;
  return r;
}

// How a raw-socket agent makes its frames.
enum class RawMode {
  // The same ~4,100 events, encoded once before the run (in frames as the client library cuts
  // them), written again and again (every event at step 0): what the daemon takes with no cost on
  // the agents' side at all. A ceiling, not a client.
  kPreEncoded,
  // The client path's events (bench/agent_driver.h: MakeForward/MakeBackward, advancing steps, the
  // same order) built, encoded (AppendEventBatchFrame, frames of kBatchFrameBytes at most) and
  // written max_batch_events at a time on the agent's own thread: a client with no queue, no
  // sender thread and no lock.
  kBuildAndEncode,
};

// Raw sockets: Hello, layer table, then event batches as `mode` says.
Result RunRaw(const std::string& socket, tracetorch::service_client::TraceServiceClient& svc,
              int agents, int layers, double seconds, RawMode mode) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int a = 0; a < agents; ++a) {
    threads.emplace_back([&, a] {
      const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::memcpy(addr.sun_path, socket.data(), socket.size());
      if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) std::exit(1);
      tracetorch::protocol::ProcessIdentity id = tracetorch::protocol::CurrentProcessIdentity();
      id.model_name = absl::StrCat("raw", a);
      std::string head;
      tracetorch::protocol::wire::HelloFields hello;
      hello.identity = &id;
      tracetorch::protocol::wire::AppendHelloFrame(hello, &head);
      auto decls = MakeLayers(100 + a, layers);
      tracetorch::protocol::wire::AppendLayerTableFrame(decls, &head);
      auto send_all = [&](const std::string& data) {
        size_t off = 0;
        while (off < data.size()) {
          const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
          if (n <= 0) return false;
          off += static_cast<size_t>(n);
        }
        return true;
      };
      send_all(head);
      std::vector<tracetorch::protocol::ForwardEvent> fwd;
      std::vector<tracetorch::protocol::BackwardEvent> bwd;
      std::string batch;
      // Frames as the client library cuts them: kBatchFrameBytes at most.
      uint64_t sequence = 0;
      auto encode = [&] {
        absl::Span<const tracetorch::protocol::ForwardEvent> f(fwd);
        absl::Span<const tracetorch::protocol::BackwardEvent> b(bwd);
        while (!f.empty() || !b.empty()) {
          const tracetorch::protocol::wire::BatchResult r =
              tracetorch::protocol::wire::AppendEventBatchFrame(
                  {.sequence = ++sequence}, f, b, tracetorch::protocol::wire::kBatchFrameBytes,
                  &batch);
          f.remove_prefix(r.forward_used);
          b.remove_prefix(r.backward_used);
        }
      };
      if (mode == RawMode::kPreEncoded) {
        for (int rep = 0; rep < 4096 / (2 * layers) + 1; ++rep) {
          for (int l = 0; l < layers; ++l) fwd.push_back(MakeForward(static_cast<uint32_t>(l), 0));
          for (int l = 0; l < layers; ++l) bwd.push_back(MakeBackward(static_cast<uint32_t>(l), 0));
        }
        encode();
        while (!stop.load(std::memory_order_relaxed) && send_all(batch)) {
        }
        close(fd);
        return;
      }
      const size_t per_write = tracetorch::client::DaemonClientOptions().max_batch_events;
      for (uint64_t step = 0; !stop.load(std::memory_order_relaxed); ++step) {
        for (int l = 0; l < layers; ++l) fwd.push_back(MakeForward(static_cast<uint32_t>(l), step));
        for (int l = layers - 1; l >= 0; --l) {
          bwd.push_back(MakeBackward(static_cast<uint32_t>(l), step));
        }
        if (fwd.size() + bwd.size() + 2 * static_cast<size_t>(layers) <= per_write) continue;
        batch.clear();
        encode();
        fwd.clear();
        bwd.clear();
        if (!send_all(batch)) break;
      }
      close(fd);
    });
  }
  absl::SleepFor(absl::Milliseconds(500));
  const Sample s0 = Probe(svc);
  const double cpu0 = ProcessCpuSeconds();
  const absl::Time t0 = absl::Now();
  absl::SleepFor(absl::Seconds(seconds));
  const Sample s1 = Probe(svc);
  const double dt = absl::ToDoubleSeconds(absl::Now() - t0);
  const double cpu1 = ProcessCpuSeconds();
  stop = true;
  for (auto& t : threads) t.join();
  Result r;
  r.events_per_s = static_cast<double>(s1.events - s0.events) / dt;
  r.daemon_cores = (s1.cpu - s0.cpu) / dt;
  r.agent_cores = (cpu1 - cpu0) / dt;
  r.rss = s1.rss;
  return r;
}

// CPU nanoseconds per accepted event of `cores` at `events_per_s`.
double NsPerEvent(double cores, double events_per_s) {
  return events_per_s > 0 ? 1e9 * cores / events_per_s : 0;
}

void Print(const char* name, int agents, const Result& r) {
  std::printf(
      "%-22s agents=%d  %8.3f M layer events/s  dropped=%5.1f%%  daemon CPU=%4.2f cores "
      "(%4.0f ns/event)  agents CPU=%4.2f cores (%4.0f ns/event)  daemon RSS=%6.1f MiB\n",
      name, agents, r.events_per_s / 1e6, 100 * r.dropped_fraction, r.daemon_cores,
      NsPerEvent(r.daemon_cores, r.events_per_s), r.agent_cores,
      NsPerEvent(r.agent_cores, r.events_per_s), static_cast<double>(r.rss) / (1 << 20));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
  const int layers = argc > 2 ? std::atoi(argv[2]) : 50;
  signal(SIGPIPE, SIG_IGN);
  tracetorch::bench::DaemonProcess daemon(TRACETORCHD_BINARY, "ttbench");
  const std::string& socket = daemon.socket();
  auto svc = tracetorch::service_client::TraceServiceClient::Create(daemon.rpc_socket());
  if (!svc.ok()) return 1;

  std::printf(
      "tracetorchd ingest: %d layers/model, forward (1 in + 1 out tensor, stats) + "
      "backward per layer per step; %.1f s per run; %u cores\n",
      layers, seconds, std::thread::hardware_concurrency());
  const Result ceil1 = RunRaw(socket, **svc, 1, layers, seconds, RawMode::kPreEncoded);
  Print("daemon ceiling", 1, ceil1);
  const Result ceil8 = RunRaw(socket, **svc, 8, layers, seconds, RawMode::kPreEncoded);
  Print("daemon ceiling", 8, ceil8);
  const Result raw1 = RunRaw(socket, **svc, 1, layers, seconds, RawMode::kBuildAndEncode);
  Print("raw socket baseline", 1, raw1);
  const Result raw8 = RunRaw(socket, **svc, 8, layers, seconds, RawMode::kBuildAndEncode);
  Print("raw socket baseline", 8, raw8);
  const Result lib1 = RunClients(socket, **svc, 1, layers, seconds);
  Print("client library", 1, lib1);
  const Result lib8 = RunClients(socket, **svc, 8, layers, seconds);
  Print("client library", 8, lib8);
  std::printf(
      "(daemon ceiling: one pre-encoded batch written again and again, no agent-side work; raw "
      "socket baseline: the same events as the client library, built, encoded and written on "
      "each agent's thread, no queue or sender thread)\n");
  std::printf("ratio client library / raw socket baseline: 1 agent %.2f, 8 agents %.2f\n",
              lib1.events_per_s / raw1.events_per_s, lib8.events_per_s / raw8.events_per_s);
  std::printf("ratio client library / daemon ceiling: 1 agent %.2f, 8 agents %.2f\n",
              lib1.events_per_s / ceil1.events_per_s, lib8.events_per_s / ceil8.events_per_s);
  // When agents and daemon share the cores, a rate is the cores over the CPU per event of both:
  // these ratios do not move with what else runs on the machine.
  auto cpu = [](const Result& r) {
    return NsPerEvent(r.daemon_cores, r.events_per_s) + NsPerEvent(r.agent_cores, r.events_per_s);
  };
  std::printf(
      "CPU per event, daemon + agents, 8 agents: ceiling %.0f ns, raw socket %.0f ns, client "
      "library %.0f ns; CPU ratio client library / raw socket baseline %.2f, / daemon ceiling "
      "%.2f\n",
      cpu(ceil8), cpu(raw8), cpu(lib8), cpu(raw8) / cpu(lib8), cpu(ceil8) / cpu(lib8));
  std::printf("target: >= 2M layer events/s with 8 agents: %s (%.2fM)\n",
              lib8.events_per_s >= 2e6 ? "met" : "NOT met", lib8.events_per_s / 1e6);

  const double soak_seconds = argc > 3 ? std::atof(argv[3]) : 0.0;
  if (soak_seconds > 0) {
    std::printf("soak: 8 client-library agents for %.0f s, daemon RSS every 30 s\n", soak_seconds);
    const Result soak = RunClients(socket, **svc, 8, layers, soak_seconds, 30.0);
    Print("soak (client library)", 8, soak);
    if (soak.rss_samples.size() >= 2) {
      // Flat: after the first sample (sessions and buffers warmed up), RSS grows by under 10%.
      const double first = static_cast<double>(soak.rss_samples.front().second);
      const double last = static_cast<double>(soak.rss_samples.back().second);
      std::printf("soak: daemon RSS %.1f MiB at %.0f s -> %.1f MiB at %.0f s (%+.1f%%): %s\n",
                  first / (1 << 20), soak.rss_samples.front().first, last / (1 << 20),
                  soak.rss_samples.back().first, 100 * (last - first) / first,
                  last <= first * 1.10 ? "flat" : "GROWING");
    }
  }
  return 0;  // `daemon` stops it.
}
