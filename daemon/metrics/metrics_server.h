// Serves a prometheus::Collectable (DaemonMetrics) as /metrics in the Prometheus text format over
// HTTP, through prometheus-cpp's Exposer (civetweb): no HTTP or exposition code of ours.
//
// Thread-safe: the Exposer's worker threads call Collect() concurrently with the daemon.
// Ownership: the server shares ownership of the collectable; destroying the server stops the
// listener (in-flight scrapes finish first).
#ifndef TRACETORCH_DAEMON_METRICS_METRICS_SERVER_H_
#define TRACETORCH_DAEMON_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"

namespace prometheus {
class Exposer;
}

namespace tracetorch::daemon {

// "PORT" -> "127.0.0.1:PORT" (loopback unless a host is given); "HOST:PORT" and "[V6]:PORT" are
// kept. InvalidArgument for an empty address or a port that is not a number in 0..65535 (0: any
// free port).
absl::StatusOr<std::string> MetricsListenAddress(std::string_view address);

class MetricsServer {
 public:
  // Listens on `address` (MetricsListenAddress). InvalidArgument for a malformed address;
  // Unavailable, naming the address, when it cannot be bound (in use, not local).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      std::string_view address, std::shared_ptr<prometheus::Collectable> collectable);
  ~MetricsServer();

  // The port listened on (the one picked for port 0).
  int port() const { return port_; }
  // The address as bound, "127.0.0.1:9464".
  const std::string& address() const { return address_; }

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                std::shared_ptr<prometheus::Collectable> collectable, std::string address,
                int port);

  // Constant after construction.
  std::unique_ptr<prometheus::Exposer> exposer_;
  const std::shared_ptr<prometheus::Collectable> collectable_;  // The Exposer holds a weak_ptr.
  const std::string address_;
  const int port_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_METRICS_METRICS_SERVER_H_
