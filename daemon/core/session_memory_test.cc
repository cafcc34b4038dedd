// Steady-state memory of sessions: 200 sessions of 16 layers, each streamed past its history
// capacity (so every history has been thinned), hold no more heap than the bound
// SessionMemoryBound() states (deploy/METRICS.md, "Memory"). Measured with glibc's mallinfo2 (heap
// bytes in use), which the rest of this process leaves alone while the test runs.
#include <malloc.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "daemon/core/session.h"
#include "daemon/testing/messages.h"
#include "gtest/gtest.h"

namespace tracetorch::daemon {
namespace {

// Under AddressSanitizer malloc is ASan's, which glibc's mallinfo2 does not see: the measurement
// runs in the GCC job (tools/test), the sanitizers still check this code's memory safety.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRACETORCH_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TRACETORCH_UNDER_ASAN 1
#endif

size_t HeapInUse() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

TEST(SessionMemory, ManySessionsStayUnderTheStatedBound) {
#ifdef TRACETORCH_UNDER_ASAN
  GTEST_SKIP() << "mallinfo2 does not see ASan's allocator; measured in the GCC job";
#endif
  constexpr int kSessions = 200;
  constexpr int kLayers = 16;
  constexpr int kSteps = 300;  // Past the 256-point history: every history thinned once.
  SessionLimits limits;
  limits.history_steps = 256;
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < kLayers; ++i) ids.push_back(i);
  std::vector<std::string> batches;  // One step of every layer each, the same for every session.
  for (int step = 0; step < kSteps; ++step) {
    v1::EventBatch b = test_util::Batch(ids, step, 1);
    if (step == kSteps - 1) {
      // The latest call, which each layer keeps, at the caps: the worst case the bound covers.
      for (v1::ForwardEvent& f : *b.mutable_forward()) {
        f.clear_outputs();
        for (size_t t = 0; t < kMaxLatestTensors; ++t) {
          for (v1::TensorEvent* e : {f.add_inputs(), f.add_outputs()}) {
            for (size_t d = 0; d < kMaxTensorDims; ++d) e->add_shape(1000 + d);
            e->mutable_stats()->set_mean(0.5);
            e->mutable_stats()->set_std(1.5);
          }
        }
      }
    }
    batches.push_back(b.SerializeAsString());
  }
  std::vector<protocol::LayerDecl> table = test_util::Table(kLayers);
  for (protocol::LayerDecl& d : table) {  // Names at their cap, too.
    LayerInfo& l = d.info;
    l.full_name += std::string(kMaxLayerNameBytes - l.full_name.size(), 'x');
    l.name += std::string(kMaxLayerNameBytes - l.name.size(), 'y');
    l.type += std::string(kMaxLayerNameBytes - l.type.size(), 'z');
  }

  const size_t before = HeapInUse();
  std::vector<std::unique_ptr<Session>> sessions;
  for (int s = 0; s < kSessions; ++s) {
    protocol::Hello hello = test_util::MakeHello();
    hello.identity.pid = 1000 + s;
    sessions.push_back(std::make_unique<Session>("s" + std::to_string(s), hello, PeerCredentials{},
                                                 absl::Now(), limits, Thresholds{}));
    ASSERT_TRUE(sessions.back()->DeclareLayers(table).ok());
    for (const std::string& b : batches) {
      absl::StatusOr<BatchOutcome> out = sessions.back()->AddBatchBytes(b);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->accepted, 2u * kLayers);
    }
  }
  const size_t used = HeapInUse() - before;
  const size_t bound = kSessions * SessionMemoryBound(kLayers, limits.history_steps);
  std::printf("%d sessions x %d layers x %zu history points: %.1f KiB per session (bound %.1f)\n",
              kSessions, kLayers, limits.history_steps, used / 1024.0 / kSessions,
              bound / 1024.0 / kSessions);
  EXPECT_LE(used, bound);
  // And the bound is not vacuous: the sessions use at least a third of it.
  EXPECT_GE(used * 3, bound);
}

// A hostile agent's latest call with thousands of tensors, or a tensor of thousands of
// dimensions, is kept capped (kMaxLatestTensors, kMaxTensorDims): the bound holds whatever the
// frames carry.
TEST(SessionMemory, LatestTensorsAreCapped) {
  Session s("s", test_util::MakeHello(), {}, absl::Now(), {}, {});
  ASSERT_TRUE(s.DeclareLayers(test_util::Table(1)).ok());
  v1::EventBatch b;
  v1::ForwardEvent* f = b.add_forward();
  f->set_layer_id(0);
  for (int i = 0; i < 1000; ++i) {
    v1::TensorEvent* t = f->add_outputs();
    for (int d = 0; d < (i == 0 ? 5000 : 2); ++d) t->add_shape(1);
    f->add_inputs()->add_shape(3);
  }
  ASSERT_EQ(s.AddBatchBytes(b.SerializeAsString()).value().accepted, 1u);
  const TraceRecord r = s.Record();
  ASSERT_EQ(r.layers.size(), 1u);
  EXPECT_EQ(r.layers[0].outputs.size(), kMaxLatestTensors);
  EXPECT_EQ(r.layers[0].inputs.size(), kMaxLatestTensors);
  EXPECT_EQ(r.layers[0].outputs[0].shape.size(), kMaxTensorDims);
  EXPECT_EQ(r.layers[0].outputs[1].shape.size(), 2u);
}

}  // namespace
}  // namespace tracetorch::daemon
