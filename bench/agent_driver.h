// What the tracetorchd benchmarks share (bench/ingest_bench.cc, bench/watch_bench.cc): the daemon
// as a child process, the synthetic model's events, and agents that stream them through the real
// client library. A benchmark has no use for a partial run: what cannot start (the daemon, an
// agent's connection, GetStats) prints why and exits the process with status 1.
#ifndef TRACETORCH_BENCH_AGENT_DRIVER_H_
#define TRACETORCH_BENCH_AGENT_DRIVER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "protocol/events.h"
#include "service_client/service_client.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::bench {

// The synthetic model: layer `layer`'s forward at `step` (one input and one output tensor,
// [32, 256], with stats) and its backward (latency, grad norm and mean).
protocol::ForwardEvent MakeForward(uint32_t layer, uint64_t step);
protocol::BackwardEvent MakeBackward(uint32_t layer, uint64_t step);
// `layers` Linear layers with ids 0..layers-1, named "a<agent>.l<i>" (unique per agent).
std::vector<protocol::LayerDecl> MakeLayers(int agent, int layers);

// GetStats, or exit.
v1::DaemonStats StatsOrExit(service_client::TraceServiceClient& service);

// tracetorchd (`binary`) in a fresh temporary directory /tmp/<prefix>_XXXXXX: --socket DIR/d.sock,
// --data-dir DIR/data, warnings only. The constructor returns once the ingest socket exists (exits
// after `start_timeout` without it); the destructor stops the daemon (SIGTERM, waits) and removes
// DIR. `wrapper`, when not empty, is the command line the daemon runs under (valgrind and its
// options: bench/daemon_count.cc).
// Thread-compatible.
class DaemonProcess {
 public:
  DaemonProcess(const std::string& binary, const std::string& prefix,
                std::vector<std::string> wrapper = {},
                absl::Duration start_timeout = absl::Seconds(10));
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  const std::string& socket() const { return socket_; }   // Ingest.
  const std::string& rpc_socket() const { return rpc_; }  // TraceService.

 private:
  std::string dir_;
  std::string socket_;
  std::string rpc_;
  pid_t pid_ = -1;
};

struct AgentOptions {
  std::string socket;  // The daemon's ingest socket.
  int agents = 1;
  int layers = 50;
  double steps_per_s = 0;              // Per agent; 0: flat out.
  std::string model_prefix = "bench";  // Agent a's model is "<prefix><a>".
  absl::Duration close_timeout = absl::Seconds(2);
};

// `agents` agents, each on its own thread with its own DaemonClient, streaming steps until Stop():
// per step a forward for every layer, then a backward for every layer in reverse order. A full
// queue drops the event (counted) and the producer sleeps 200 us so that it does not starve the
// sender and the daemon of CPU.
// Thread-safe.
class SyntheticAgents {
 public:
  explicit SyntheticAgents(AgentOptions options);  // Starts them.
  ~SyntheticAgents();                              // Stop().
  SyntheticAgents(const SyntheticAgents&) = delete;
  SyntheticAgents& operator=(const SyntheticAgents&) = delete;

  // Blocks until every agent has connected; their session ids, by agent.
  std::vector<std::string> WaitConnected() ABSL_LOCKS_EXCLUDED(mu_);

  struct Totals {
    uint64_t produced = 0;
    uint64_t dropped = 0;  // Refused by a full client queue.
    double dropped_fraction() const {
      return produced > 0 ? static_cast<double>(dropped) / static_cast<double>(produced) : 0;
    }
  };
  // Stops the agents (each closes its client) and joins them. Idempotent.
  Totals Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Agent(int index) ABSL_LOCKS_EXCLUDED(mu_);

  const AgentOptions options_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;

  absl::Mutex mu_;
  std::vector<std::string> sessions_ ABSL_GUARDED_BY(mu_);
  int connected_ ABSL_GUARDED_BY(mu_) = 0;
  Totals totals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tracetorch::bench

#endif  // TRACETORCH_BENCH_AGENT_DRIVER_H_
