// The daemon's share of a layer event, for counting its instructions (bench/overhead_table.py):
// starts tracetorchd, optionally under a wrapper (valgrind --tool=callgrind ...), streams 8
// synthetic agents (50 layers each) through the client library for SECONDS at STEPS_PER_S steps per
// second each, reads the daemon's accepted-event count, and stops the daemon (SIGTERM: callgrind
// writes its totals as the daemon exits).
//
//   tracetorchd_count_bench SECONDS STEPS_PER_S [WRAPPER ...]
//
// Prints one line: "events_total N agent_dropped M". Two runs of the same length at different
// rates under callgrind give the daemon's instructions per event as (I2 - I1) / (N2 - N1):
// start-up, shutdown and whatever the daemon does per second (ticks, snapshots of the same
// sessions) cancel. Rates stay low (50 steps/s: 8 x 50 layers x 2 events x 50 = 40,000 events/s) so
// that a daemon slowed 50x by valgrind keeps up and the difference is events, not drops.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "bench/agent_driver.h"

int main(int argc, char** argv) {
  if (argc < 3 || std::atof(argv[1]) <= 0 || std::atof(argv[2]) <= 0) {
    std::fprintf(stderr, "usage: %s SECONDS STEPS_PER_S [WRAPPER ...]\n", argv[0]);
    return 2;
  }
  const double seconds = std::atof(argv[1]);
  const double steps_per_s = std::atof(argv[2]);
  signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> wrapper(argv + 3, argv + argc);
  tracetorch::bench::DaemonProcess daemon(TRACETORCHD_BINARY, "ttcount", wrapper,
                                          absl::Seconds(wrapper.empty() ? 10 : 120));
  tracetorch::bench::AgentOptions options;
  options.socket = daemon.socket();
  options.agents = 8;
  options.layers = 50;
  options.steps_per_s = steps_per_s;
  options.close_timeout = absl::Seconds(wrapper.empty() ? 2 : 30);
  auto service = tracetorch::service_client::TraceServiceClient::Create(daemon.rpc_socket());
  if (!service.ok()) {
    std::fprintf(stderr, "%s\n", service.status().ToString().c_str());
    return 1;
  }
  tracetorch::bench::SyntheticAgents agents(options);
  agents.WaitConnected();
  absl::SleepFor(absl::Seconds(seconds));
  const tracetorch::bench::SyntheticAgents::Totals totals = agents.Stop();
  const tracetorch::v1::DaemonStats stats = tracetorch::bench::StatsOrExit(**service);
  std::printf("events_total %llu agent_dropped %llu\n",
              static_cast<unsigned long long>(stats.events_total()),
              static_cast<unsigned long long>(totals.dropped));
  return 0;
}
