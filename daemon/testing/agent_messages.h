// What the daemon's tests and fuzzers feed sessions (not part of tracetorchd): an agent's Hello, a
// layer table, a batch of events. No test framework: fuzz targets use them too (messages.h adds
// the gtest helpers).
#ifndef TRACETORCH_DAEMON_TESTING_AGENT_MESSAGES_H_
#define TRACETORCH_DAEMON_TESTING_AGENT_MESSAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tracetorch/v1/agent.pb.h"

namespace tracetorch::daemon::test_util {

// A protocol-1 Hello from pid 77 on "box" for model "Net"; with a job id, as that job's `rank`.
inline v1::Hello MakeHello(const std::string& job_id = "", int rank = 0) {
  v1::Hello h;
  h.set_protocol_version(v1::PROTOCOL_VERSION_1);
  h.mutable_identity()->set_pid(77);
  h.mutable_identity()->set_host("box");
  h.mutable_identity()->set_model_name("Net");
  if (!job_id.empty()) {
    h.mutable_identity()->set_job_id(job_id);
    h.mutable_identity()->set_rank(rank);
  }
  return h;
}

// Layers with ids 0..layers-1: "l<i>", Linear, full name "net.l<i>", depth 2, 100 parameters.
inline v1::LayerTable Table(int layers) {
  v1::LayerTable t;
  for (int i = 0; i < layers; ++i) {
    v1::LayerDecl* d = t.add_layers();
    d->set_id(static_cast<uint32_t>(i));
    d->set_name(absl::StrCat("l", i));
    d->set_type("Linear");
    d->set_full_name(absl::StrCat("net.l", i));
    d->set_depth(2);
    d->set_params(100);
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
