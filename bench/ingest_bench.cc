// Ingest throughput: N synthetic agents using the real client library against the real tracetorchd
// (a subprocess), and a raw-socket baseline in the same run (pre-encoded frames written straight
// to the daemon's socket: what the daemon can take without any client-side cost).
//
// Prints, per configuration: layer events/s the daemon accepted (from GetStats), events dropped by
// the agents (queue full), the daemon's CPU use (cores) and RSS. Then the ratio of the client
// library's rate to the raw baseline's.
//
// Then, with a soak time, 8 client-library agents stream for that long while the daemon's RSS is
// sampled every 30 s: memory must stay flat (bounded by layers and history, never by steps).
//
// Usage: tracetorchd_ingest_bench [seconds per run, default 3] [layers per model, default 50]
//                                 [soak seconds, default 0 = no soak; 300 for the 5-minute check]
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/daemon_client.h"
#include "protocol/wire.h"
#include "service_client/service_client.h"

namespace {

using tracetorch::client::DaemonClient;

struct Sample {
  uint64_t events = 0;
  double cpu = 0;
  uint64_t rss = 0;
};

Sample Probe(tracetorch::service_client::TraceServiceClient& svc) {
  auto s = svc.GetStats();
  if (!s.ok()) {
    std::fprintf(stderr, "GetStats: %s\n", std::string(s.status().message()).c_str());
    std::exit(1);
  }
  return {s->events_total(), s->cpu_seconds(), s->rss_bytes()};
}

tracetorch::protocol::ForwardEvent MakeForward(uint32_t layer, uint64_t step) {
  tracetorch::protocol::ForwardEvent e;
  e.layer_id = layer;
  e.step = step;
  e.latency_ms = 0.05 + 0.001 * layer;
  tracetorch::protocol::WireTensor t;
  t.shape = {32, 256};
  t.stats = tracetorch::TensorStats{0.01, 1.0, -3.5, 3.5, 0, 0};
  e.inputs.push_back(t);
  e.outputs.push_back(t);
  return e;
}

tracetorch::protocol::BackwardEvent MakeBackward(uint32_t layer, uint64_t step) {
  tracetorch::protocol::BackwardEvent e;
  e.layer_id = layer;
  e.step = step;
  e.sample.latency_ms = 0.1;
  e.sample.grad_norm = 0.5;
  e.sample.grad_mean = 0.001;
  return e;
}

std::vector<tracetorch::protocol::LayerDecl> Layers(int agent, int layers) {
  std::vector<tracetorch::protocol::LayerDecl> out;
  for (int l = 0; l < layers; ++l) {
    out.push_back({static_cast<uint32_t>(l),
                   {absl::StrCat("l", l), "Linear", absl::StrCat("a", agent, ".l", l), 2, 1000}});
  }
  return out;
}

struct Result {
  double events_per_s = 0;
  double dropped_fraction = 0;
  double daemon_cores = 0;
  uint64_t rss = 0;
  std::vector<std::pair<double, uint64_t>> rss_samples;  // (seconds into the run, RSS bytes)
};

// Runs `agents` agents for `seconds`, each producing forward+backward events for every layer of
// every step, as fast as the queue takes them (a full queue: the event is dropped and counted, and
// the producer sleeps 200 us so that it does not starve the sender and the daemon of CPU).
// With `sample_every_s` > 0, also samples the daemon's RSS at that period.
Result RunClients(const std::string& socket, tracetorch::service_client::TraceServiceClient& svc,
                  int agents, int layers, double seconds, double sample_every_s = 0) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> dropped{0}, produced{0};
  std::vector<std::thread> threads;
  for (int a = 0; a < agents; ++a) {
    threads.emplace_back([&, a] {
      tracetorch::client::DaemonClientOptions o;
      o.address = socket;
      o.identity = tracetorch::protocol::CurrentProcessIdentity();
      o.identity.model_name = absl::StrCat("bench", a);
      auto c = DaemonClient::Create(o);
      if (!c.ok()) std::exit(1);
      (*c)->DeclareLayers(Layers(a, layers));
      if (!(*c)->WaitUntilConnected(absl::Seconds(5)).ok()) std::exit(1);
      uint64_t local_drop = 0, local_prod = 0;
      for (uint64_t step = 0; !stop.load(std::memory_order_relaxed); ++step) {
        for (int l = 0; l < layers; ++l) {
          ++local_prod;
          if (!(*c)->EnqueueForward(MakeForward(static_cast<uint32_t>(l), step))) {
            ++local_drop;
            absl::SleepFor(absl::Microseconds(200));  // Leave the CPU to the sender and daemon.
          }
        }
        for (int l = layers - 1; l >= 0; --l) {
          ++local_prod;
          if (!(*c)->EnqueueBackward(MakeBackward(static_cast<uint32_t>(l), step))) {
            ++local_drop;
            absl::SleepFor(absl::Microseconds(200));
          }
        }
      }
      (void)(*c)->Close(absl::Seconds(2));
      dropped += local_drop;
      produced += local_prod;
    });
  }
  absl::SleepFor(absl::Milliseconds(500));  // Warm up: connections, buffers.
  const Sample s0 = Probe(svc);
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
  stop = true;
  for (auto& t : threads) t.join();
  r.events_per_s = static_cast<double>(s1.events - s0.events) / dt;
  r.dropped_fraction = produced.load() > 0 ? static_cast<double>(dropped.load()) /
                                                 static_cast<double>(produced.load())
                                           : 0;
  r.daemon_cores = (s1.cpu - s0.cpu) / dt;
  r.rss = s1.rss;
  return r;
}

// Writes pre-encoded frames (Hello, layer table, then the same batch forever) over raw sockets.
Result RunRaw(const std::string& socket, tracetorch::service_client::TraceServiceClient& svc,
              int agents, int layers, double seconds) {
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
      auto decls = Layers(100 + a, layers);
      tracetorch::protocol::wire::AppendLayerTableFrame(decls, &head);
      std::vector<tracetorch::protocol::ForwardEvent> fwd;
      std::vector<tracetorch::protocol::BackwardEvent> bwd;
      for (int rep = 0; rep < 4096 / (2 * layers) + 1; ++rep) {
        for (int l = 0; l < layers; ++l) fwd.push_back(MakeForward(static_cast<uint32_t>(l), 0));
        for (int l = 0; l < layers; ++l) bwd.push_back(MakeBackward(static_cast<uint32_t>(l), 0));
      }
      std::string batch;
      tracetorch::protocol::wire::AppendEventBatchFrame({}, fwd, bwd, 16u << 20, &batch);
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
      while (!stop.load(std::memory_order_relaxed) && send_all(batch)) {
      }
      close(fd);
    });
  }
  absl::SleepFor(absl::Milliseconds(500));
  const Sample s0 = Probe(svc);
  const absl::Time t0 = absl::Now();
  absl::SleepFor(absl::Seconds(seconds));
  const Sample s1 = Probe(svc);
  const double dt = absl::ToDoubleSeconds(absl::Now() - t0);
  stop = true;
  for (auto& t : threads) t.join();
  Result r;
  r.events_per_s = static_cast<double>(s1.events - s0.events) / dt;
  r.daemon_cores = (s1.cpu - s0.cpu) / dt;
  r.rss = s1.rss;
  return r;
}

void Print(const char* name, int agents, const Result& r) {
  std::printf(
      "%-22s agents=%d  %8.3f M layer events/s  dropped=%5.1f%%  daemon CPU=%4.2f cores  "
      "daemon RSS=%6.1f MiB\n",
      name, agents, r.events_per_s / 1e6, 100 * r.dropped_fraction, r.daemon_cores,
      static_cast<double>(r.rss) / (1 << 20));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
  const int layers = argc > 2 ? std::atoi(argv[2]) : 50;
  signal(SIGPIPE, SIG_IGN);
  std::string tmpl = "/tmp/ttbench_XXXXXX";
  const std::string dir = mkdtemp(tmpl.data());
  const std::string socket = dir + "/d.sock";
  const pid_t daemon = fork();
  if (daemon == 0) {
    const std::string data = dir + "/data";
    execl(TRACETORCHD_BINARY, TRACETORCHD_BINARY, "--socket", socket.c_str(), "--data-dir",
          data.c_str(), "--log-level", "warn", static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string rpc = dir + "/tracetorchd-rpc.sock";
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!std::filesystem::exists(socket) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  auto svc = tracetorch::service_client::TraceServiceClient::Create(rpc);
  if (!svc.ok()) return 1;

  std::printf(
      "tracetorchd ingest: %d layers/model, forward (1 in + 1 out tensor, stats) + "
      "backward per layer per step; %.1f s per run; %u cores\n",
      layers, seconds, std::thread::hardware_concurrency());
  const Result raw1 = RunRaw(socket, **svc, 1, layers, seconds);
  Print("raw socket baseline", 1, raw1);
  const Result raw8 = RunRaw(socket, **svc, 8, layers, seconds);
  Print("raw socket baseline", 8, raw8);
  const Result lib1 = RunClients(socket, **svc, 1, layers, seconds);
  Print("client library", 1, lib1);
  const Result lib8 = RunClients(socket, **svc, 8, layers, seconds);
  Print("client library", 8, lib8);
  std::printf("ratio client library / raw baseline: 1 agent %.2f, 8 agents %.2f\n",
              lib1.events_per_s / raw1.events_per_s, lib8.events_per_s / raw8.events_per_s);
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

  kill(daemon, SIGTERM);
  int status = 0;
  waitpid(daemon, &status, 0);
  std::filesystem::remove_all(dir);
  return 0;
}
