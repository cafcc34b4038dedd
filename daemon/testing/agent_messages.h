// What the daemon's tests and fuzzers feed sessions (not part of tracetorchd): an agent's Hello and
// layer table (as the core takes them, protocol/events.h), a batch of events (as the agent sends it:
// a session takes its bytes, Batch(...).SerializeAsString()). No test framework: fuzz targets use
// them too (messages.h adds the gtest helpers).
#ifndef TRACETORCH_DAEMON_TESTING_AGENT_MESSAGES_H_
#define TRACETORCH_DAEMON_TESTING_AGENT_MESSAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "protocol/events.h"
#include "tracetorch/v1/agent.pb.h"

namespace tracetorch::daemon::test_util {

// A protocol-1 Hello from pid 77 on "box" for model "Net"; with a job id, as that job's `rank`.
inline protocol::Hello MakeHello(const std::string& job_id = "", int rank = 0) {
  protocol::Hello h;
  h.protocol_version = 1;  // tracetorch.v1.PROTOCOL_VERSION_1
  h.identity.pid = 77;
  h.identity.host = "box";
  h.identity.model_name = "Net";
  if (!job_id.empty()) {
    h.identity.job_id = job_id;
    h.identity.rank = rank;
  }
  return h;
}

// Layers with ids 0..layers-1: "l<i>", Linear, full name "net.l<i>", depth 2, 100 parameters.
inline std::vector<protocol::LayerDecl> Table(int layers) {
  std::vector<protocol::LayerDecl> t;
  for (int i = 0; i < layers; ++i) {
    protocol::LayerDecl& d = t.emplace_back();
    d.id = static_cast<uint32_t>(i);
    d.info.name = absl::StrCat("l", i);
    d.info.type = "Linear";
    d.info.full_name = absl::StrCat("net.l", i);
    d.info.depth = 2;
    d.info.params = 100;
  }
  return t;
}

// Forward (one [4, 8] output) and backward events for `layers` (ids) over steps
// [first, first + steps); latency, output std and grad norm move with the step.
inline v1::EventBatch Batch(const std::vector<uint32_t>& layers, int first, int steps) {
  v1::EventBatch b;
  for (int step = first; step < first + steps; ++step) {
    for (uint32_t l : layers) {
      v1::ForwardEvent* f = b.add_forward();
      f->set_layer_id(l);
      f->set_step(static_cast<uint64_t>(step));
      f->set_latency_ms(0.1 * (l + 1) + 0.001 * step);
      v1::TensorEvent* out = f->add_outputs();
      out->add_shape(4);
      out->add_shape(8);
      out->mutable_stats()->set_mean(0.0);
      out->mutable_stats()->set_std(1.0 + 0.01 * step);
      v1::BackwardEvent* g = b.add_backward();
      g->set_layer_id(l);
      g->set_step(static_cast<uint64_t>(step));
      g->set_grad_norm(1.0 + step);
    }
  }
  return b;
}

}  // namespace tracetorch::daemon::test_util

#endif  // TRACETORCH_DAEMON_TESTING_AGENT_MESSAGES_H_
