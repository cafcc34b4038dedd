// For the CLI tests that run a real tracetorchd in-process (remote_diff_test.cc,
// fleet_sessions_test.cc): a finished session streamed through the agent's client library.
#ifndef TRACETORCH_CLI_DAEMON_TEST_UTIL_H_
#define TRACETORCH_CLI_DAEMON_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/daemon_client.h"
#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"
#include "protocol/events.h"
#include "service_client/service_client.h"

namespace tracetorch::cli::test_util {

// Streams `steps` steps of a one-layer model (layer "fc", Linear; step s has forward latency
// latency_ms × (1 + 0.01 × (s % 3)) and one [4, 8] output) as `identity` to the daemon whose
// agents' socket is `ingest_socket`, closes, and waits until the daemon's service at
// `service_address` has the session finished with every event. Returns the session id; a failure is
// reported through gtest (and the id may then be empty).
inline std::string StreamFinishedSession(const std::string& ingest_socket,
                                         const std::string& service_address,
                                         protocol::ProcessIdentity identity, int steps,
                                         double latency_ms) {
  client::DaemonClientOptions o;
  o.address = absl::StrCat("unix://", ingest_socket);
  o.identity = std::move(identity);
  o.flush_interval = absl::Milliseconds(5);
  auto c = client::DaemonClient::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return "";
  (*c)->DeclareLayers(std::vector<protocol::LayerDecl>{{0, {"fc", "Linear", "fc", 1, 10}}});
  for (int step = 0; step < steps; ++step) {
    ForwardSample f;
    f.latency_ms = latency_ms * (1.0 + 0.01 * (step % 3));
    f.outputs = {{{4, 8}, "torch.float32", "cpu", TensorStats{0.0, 1.0, -1.0, 1.0, 0, 0}}};
    (*c)->EnqueueForward(protocol::ToForwardEvent(0, static_cast<uint64_t>(step), f));
  }
  EXPECT_TRUE((*c)->Close(absl::Seconds(5)).ok());
  const std::string id = (*c)->session_id();
  auto service = service_client::TraceServiceClient::Create(service_address);
  EXPECT_TRUE(service.ok()) << service.status();
  if (!service.ok()) return id;
  EXPECT_TRUE(daemon::test_util::WaitFor([&] {
    auto snap = (*service)->GetSnapshot(id);
    return snap.ok() && snap->session().state() == v1::SESSION_STATE_FINISHED &&
           snap->session().events() == static_cast<uint64_t>(steps);
  })) << "session "
      << id << " did not finish with " << steps << " events";
  return id;
}

}  // namespace tracetorch::cli::test_util

#endif  // TRACETORCH_CLI_DAEMON_TEST_UTIL_H_
