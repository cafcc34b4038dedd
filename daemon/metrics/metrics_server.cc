#include "daemon/metrics/metrics_server.h"

#include <exception>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "prometheus/exposer.h"

namespace tracetorch::daemon {

absl::StatusOr<std::string> MetricsListenAddress(std::string_view address_in) {
  // Debian's absl has its own string_view.
  const absl::string_view address(address_in.data(), address_in.size());
  if (address.empty()) return absl::InvalidArgumentError("empty metrics address");
  std::string host = "127.0.0.1";
  absl::string_view port_text = address;
  if (const size_t colon = address.rfind(':'); colon != absl::string_view::npos) {
    host = std::string(address.substr(0, colon));
    port_text = address.substr(colon + 1);
    const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
    if (host.empty() || (!bracketed && host.find(':') != std::string::npos)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics address '", address, "': expected PORT, HOST:PORT or [V6]:PORT"));
    }
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "': the port must be a number 0..65535"));
  }
  return absl::StrCat(host, ":", port);
}

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                             std::shared_ptr<prometheus::Collectable> collectable,
                             std::string address, int port)
    : exposer_(std::move(exposer)),
      collectable_(std::move(collectable)),
      address_(std::move(address)),
      port_(port) {}

MetricsServer::~MetricsServer() { exposer_.reset(); }

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    std::string_view address, std::shared_ptr<prometheus::Collectable> collectable) {
  absl::StatusOr<std::string> bind = MetricsListenAddress(address);
  if (!bind.ok()) return bind.status();
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // One worker: a scrape is cheap and Prometheus scrapes one at a time.
    exposer = std::make_unique<prometheus::Exposer>(*bind, /*num_threads=*/1);
    exposer->RegisterCollectable(collectable);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", *bind, ": ", e.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", *bind, ": no port"));
  }
  const std::string host = bind->substr(0, bind->rfind(':'));
  std::string bound = absl::StrCat(host, ":", ports.front());
  return std::unique_ptr<MetricsServer>(new MetricsServer(
      std::move(exposer), std::move(collectable), std::move(bound), ports.front()));
}

}  // namespace tracetorch::daemon
