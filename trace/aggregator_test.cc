#include "trace/aggregator.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

LayerInfo Info(std::string full_name, std::string type = "Linear") {
  LayerInfo info;
  const size_t dot = full_name.rfind('.');
  info.name = dot == std::string::npos ? full_name : full_name.substr(dot + 1);
  info.type = std::move(type);
  info.full_name = std::move(full_name);
  info.depth = 1;
  for (char c : info.full_name) info.depth += c == '.' ? 1 : 0;
  info.params = 10;
  return info;
}

TensorInfo Tensor(std::vector<int64_t> shape, double mean, double std, int64_t nan_count = 0,
                  int64_t inf_count = 0) {
  TensorInfo t;
  t.shape = std::move(shape);
  t.dtype = "torch.float32";
  t.device = "cpu";
  TensorStats s;
  s.mean = mean;
  s.std = std;
  s.min = mean - std;
  s.max = mean + std;
  s.nan_count = nan_count;
  s.inf_count = inf_count;
  t.stats = s;
  return t;
}

ForwardSample Forward(double latency, TensorInfo out) {
  ForwardSample s;
  s.latency_ms = latency;
  s.inputs.push_back(Tensor({4, 8}, 0, 1));
  s.outputs.push_back(std::move(out));
  return s;
}

TraceAggregator::LayerId MustDeclare(TraceAggregator& agg, const LayerInfo& info) {
  absl::StatusOr<TraceAggregator::LayerId> id = agg.DeclareLayer(info);
  EXPECT_TRUE(id.ok()) << id.status();
  return id.value_or(-1);
}

std::vector<std::string> Names(const TraceRecord& record) {
  std::vector<std::string> names;
  for (const LayerTrace& l : record.layers) names.push_back(l.full_name);
  return names;
}

TEST(TraceAggregator, DeclareReturnsDenseIdsAndReusesExisting) {
  TraceAggregator agg;
  EXPECT_EQ(MustDeclare(agg, Info("a")), 0);
  EXPECT_EQ(MustDeclare(agg, Info("b")), 1);
  EXPECT_EQ(MustDeclare(agg, Info("a")), 0);
  EXPECT_EQ(agg.declared_layers(), 2);
}

TEST(TraceAggregator, RedeclaringWithAnotherTypeIsInvalid) {
  TraceAggregator agg;
  MustDeclare(agg, Info("a", "Linear"));
  absl::StatusOr<TraceAggregator::LayerId> id = agg.DeclareLayer(Info("a", "Conv2d"));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(id.status().message(), HasSubstr("Conv2d"));
}

TEST(TraceAggregator, UndeclaredIdIsInvalidArgument) {
  TraceAggregator agg;
  MustDeclare(agg, Info("a"));
  EXPECT_EQ(agg.AddForward(1, Forward(1.0, Tensor({1}, 0, 1))).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(agg.AddForward(-1, Forward(1.0, Tensor({1}, 0, 1))).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(agg.AddBackward(7, BackwardSample{}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(agg.Snapshot().layers.empty());
}

TEST(TraceAggregator, ABatchAddsAsTheSingleCallsDo) {
  TraceAggregator one, many;
  const auto a = MustDeclare(one, Info("fc"));
  const auto b = MustDeclare(many, Info("fc"));
  BackwardSample g;
  g.grad_norm = 2.0;
  g.latency_ms = 0.5;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(one.AddForward(a, Forward(1.0 + i, Tensor({2}, 0, 1 + i))).ok());
    ASSERT_TRUE(one.AddBackward(a, g).ok());
  }
  {
    TraceAggregator::Batch batch(&many);
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(batch.AddForward(b, Forward(1.0 + i, Tensor({2}, 0, 1 + i))).ok());
      ASSERT_TRUE(batch.AddBackward(b, g).ok());
    }
    EXPECT_EQ(batch.AddForward(9, Forward(1.0, Tensor({1}, 0, 1))).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(batch.AddBackward(-1, g).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(batch.MutableLatestTensors(3).status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(one.Snapshot().layers, many.Snapshot().layers);

  // Samples added without tensors, then the last one's tensors: the same record again.
  TraceAggregator later;
  const auto c = MustDeclare(later, Info("fc"));
  {
    TraceAggregator::Batch batch(&later);
    for (int i = 0; i < 3; ++i) {
      ForwardSample s = Forward(1.0 + i, Tensor({2}, 0, 1 + i));
      s.tensors_omitted = true;
      s.inputs.clear();
      s.outputs.clear();
      ASSERT_TRUE(batch.AddForward(c, std::move(s)).ok());
      ASSERT_TRUE(batch.AddBackward(c, g).ok());
    }
    const ForwardSample last = Forward(3.0, Tensor({2}, 0, 3));
    absl::StatusOr<TraceAggregator::Batch::LatestTensors> latest = batch.MutableLatestTensors(c);
    ASSERT_TRUE(latest.ok()) << latest.status();
    *latest->inputs = last.inputs;
    *latest->outputs = last.outputs;
  }
  EXPECT_EQ(one.Snapshot().layers, later.Snapshot().layers);
}

TEST(TraceAggregator, KeepsMinMeanMaxAcrossForwards) {
  TraceAggregator agg;
  const auto id = MustDeclare(agg, Info("fc"));
  ASSERT_TRUE(agg.AddForward(id, Forward(3.0, Tensor({2}, 0, 1))).ok());
  ASSERT_TRUE(agg.AddForward(id, Forward(1.0, Tensor({2}, 0, 1))).ok());
  ForwardSample unmeasured = Forward(0, Tensor({2}, 0, 1));
  unmeasured.latency_ms.reset();
  ASSERT_TRUE(agg.AddForward(id, unmeasured).ok());
  ASSERT_TRUE(agg.AddForward(id, Forward(2.0, Tensor({2}, 0, 1))).ok());

  const TraceRecord record = agg.Snapshot();
  ASSERT_EQ(record.layers.size(), 1u);
  const LayerTrace& l = record.layers[0];
  EXPECT_EQ(l.forward_count, 4);
  EXPECT_EQ(l.latency_ms, 2.0);
  EXPECT_EQ(l.latency_ms_min, 1.0);
  EXPECT_EQ(l.latency_ms_max, 3.0);
  EXPECT_EQ(l.latency_ms_mean, 2.0);  // Over the three measured calls.
  EXPECT_EQ(l.name, "fc");
  EXPECT_EQ(l.type, "Linear");
  EXPECT_EQ(l.params, 10);
  EXPECT_EQ(l.backward_count, 0);
  EXPECT_FALSE(l.bwd_latency_ms.has_value());
  EXPECT_TRUE(record.warnings.empty());
}

TEST(TraceAggregator, KeepsLatestTensorsAndMemoryDeltas) {
  TraceAggregator agg;
  const auto id = MustDeclare(agg, Info("fc"));
  ForwardSample first = Forward(1.0, Tensor({2, 3}, 0.5, 1));
  first.mem_alloc_delta = 512;
  first.mem_reserved_delta = 2048;
  ASSERT_TRUE(agg.AddForward(id, first).ok());
  ForwardSample second = Forward(1.0, Tensor({4, 5}, -0.5, 2));
  second.inputs = {Tensor({9}, 1, 1)};
  ASSERT_TRUE(agg.AddForward(id, second).ok());

  const LayerTrace l = agg.Snapshot().layers.at(0);
  ASSERT_EQ(l.outputs.size(), 1u);
  EXPECT_EQ(l.outputs[0], Tensor({4, 5}, -0.5, 2));
  EXPECT_THAT(l.inputs, ElementsAre(Tensor({9}, 1, 1)));
  EXPECT_FALSE(l.fwd_mem_alloc_delta.has_value());  // The latest call had none.
  EXPECT_FALSE(l.fwd_mem_reserved_delta.has_value());
}

TEST(TraceAggregator, NanAndInfFlagsAreSticky) {
  TraceAggregator agg;
  const auto id = MustDeclare(agg, Info("fc"));
  ASSERT_TRUE(agg.AddForward(id, Forward(1, Tensor({2}, 0, 1))).ok());
  EXPECT_FALSE(agg.Snapshot().layers[0].has_nan);
  ASSERT_TRUE(agg.AddForward(id, Forward(1, Tensor({2}, 0, 1, /*nan_count=*/3))).ok());
  ASSERT_TRUE(agg.AddForward(id, Forward(1, Tensor({2}, 0, 1))).ok());
  ASSERT_TRUE(agg.AddForward(id, Forward(1, Tensor({2}, 0, 1, 0, /*inf_count=*/1))).ok());
  ASSERT_TRUE(agg.AddForward(id, Forward(1, Tensor({2}, 0, 1))).ok());
  const LayerTrace l = agg.Snapshot().layers[0];
  EXPECT_TRUE(l.has_nan);
  EXPECT_TRUE(l.has_inf);
  EXPECT_EQ(l.outputs[0].stats->nan_count, 0);  // Latest tensors, sticky flags.
}

// capture_stats=False: no statistics, only the counts; the flags come from them all the same.
TEST(TraceAggregator, CountsWithoutStatisticsSetTheFlags) {
  TraceAggregator agg;
  const auto id = MustDeclare(agg, Info("fc"));
  TensorInfo counted;
  counted.shape = {2};
  counted.dtype = "torch.float32";
  counted.device = "cpu";
  counted.nonfinite = NonFiniteCounts{.nan_count = 0, .inf_count = 2};
  ASSERT_TRUE(agg.AddForward(id, Forward(1, counted)).ok());
  const LayerTrace l = agg.Snapshot().layers[0];
  EXPECT_FALSE(l.has_nan);
  EXPECT_TRUE(l.has_inf);
  EXPECT_FALSE(l.outputs[0].stats.has_value());
}

TEST(RecordLatency, FoldsIntoALoneLayer) {
  LayerTrace l;
  RecordForwardLatency(2.0, &l);
  RecordForwardLatency(4.0, &l);
  RecordForwardLatency(0.0, &l);
  EXPECT_EQ(l.forward_count, 3);
  EXPECT_EQ(l.latency_ms, 0.0);
  EXPECT_EQ(l.latency_ms_min, 0.0);
  EXPECT_EQ(l.latency_ms_max, 4.0);
  EXPECT_DOUBLE_EQ(*l.latency_ms_mean, 2.0);
  RecordBackwardLatency(1.5, &l);
  EXPECT_EQ(l.backward_count, 1);
  EXPECT_EQ(l.bwd_latency_ms_mean, 1.5);
  EXPECT_EQ(l.forward_count, 3);
}

TEST(TraceAggregator, OmittedTensorsKeepTheLatestAndStillCarryFlags) {
  TraceAggregator agg;
  const auto id = MustDeclare(agg, Info("fc"));
  ASSERT_TRUE(agg.AddForward(id, Forward(1.0, Tensor({4, 5}, 0.5, 1))).ok());
  ForwardSample superseded;  // A later call whose tensors a keeper skipped.
  superseded.latency_ms = 3.0;
  superseded.tensors_omitted = true;
  superseded.outputs_had_nan = true;
  superseded.outputs = {Tensor({1}, 9, 9)};  // Ignored: tensors_omitted.
  ASSERT_TRUE(agg.AddForward(id, superseded).ok());

  const LayerTrace l = agg.Snapshot().layers.at(0);
  EXPECT_EQ(l.forward_count, 2);
  EXPECT_EQ(l.latency_ms, 3.0);
  EXPECT_EQ(l.latency_ms_mean, 2.0);
  EXPECT_TRUE(l.has_nan);
  EXPECT_FALSE(l.has_inf);
  ASSERT_EQ(l.outputs.size(), 1u);
  EXPECT_EQ(l.outputs[0], Tensor({4, 5}, 0.5, 1));
}

TEST(TraceAggregator, NanInInputsDoesNotFlagTheLayer) {
  TraceAggregator agg;
  const auto id = MustDeclare(agg, Info("fc"));
  ForwardSample s = Forward(1, Tensor({2}, 0, 1));
  s.inputs = {Tensor({2}, 0, 1, /*nan_count=*/2)};
  ASSERT_TRUE(agg.AddForward(id, s).ok());
  EXPECT_FALSE(agg.Snapshot().layers[0].has_nan);
}

TEST(TraceAggregator, BackwardKeepsLatestGradsAndStickyFlags) {
  TraceAggregator agg;
  const auto id = MustDeclare(agg, Info("fc"));
  ASSERT_TRUE(agg.AddForward(id, Forward(1, Tensor({2}, 0, 1))).ok());

  BackwardSample b1;
  b1.latency_ms = 4.0;
  b1.grad_norm = 1.5;
  b1.grad_mean = 0.1;
  b1.grad_has_nan = true;
  b1.grad_all_zero = true;
  b1.grad_in_norm = 0.7;
  b1.grad_in_has_nan = true;
  b1.mem_alloc_delta = 100;
  ASSERT_TRUE(agg.AddBackward(id, b1).ok());
  BackwardSample b2;
  b2.latency_ms = 2.0;
  b2.grad_norm = 0.5;
  b2.grad_mean = -0.2;
  ASSERT_TRUE(agg.AddBackward(id, b2).ok());

  const LayerTrace l = agg.Snapshot().layers[0];
  EXPECT_EQ(l.backward_count, 2);
  EXPECT_EQ(l.bwd_latency_ms, 2.0);
  EXPECT_EQ(l.bwd_latency_ms_min, 2.0);
  EXPECT_EQ(l.bwd_latency_ms_max, 4.0);
  EXPECT_EQ(l.bwd_latency_ms_mean, 3.0);
  EXPECT_EQ(l.grad_norm, 0.5);
  EXPECT_EQ(l.grad_mean, -0.2);
  EXPECT_FALSE(l.grad_in_norm.has_value());  // The latest backward had no input gradient.
  EXPECT_TRUE(l.grad_has_nan);
  EXPECT_TRUE(l.has_zero_grad);
  EXPECT_TRUE(l.grad_in_has_nan);
  EXPECT_FALSE(l.bwd_mem_alloc_delta.has_value());
  EXPECT_EQ(l.forward_count, 1);
  EXPECT_EQ(l.latency_ms, 1.0);
}

TEST(TraceAggregator, OrdersByFirstForwardChildrenFirstAndOmitsUnobserved) {
  TraceAggregator agg;
  // Declared parents first, as module registration does.
  const auto blocks = MustDeclare(agg, Info("blocks", "Sequential"));
  const auto block0 = MustDeclare(agg, Info("blocks.0", "Block"));
  const auto fc = MustDeclare(agg, Info("blocks.0.fc"));
  const auto act = MustDeclare(agg, Info("blocks.0.act", "GELU"));
  MustDeclare(agg, Info("unused"));
  const auto head = MustDeclare(agg, Info("head"));

  for (int step = 0; step < 3; ++step) {
    // Children complete their forward before their parents.
    ASSERT_TRUE(agg.AddForward(fc, Forward(1, Tensor({2}, 0, 1))).ok());
    ASSERT_TRUE(agg.AddForward(act, Forward(1, Tensor({2}, 0, 1))).ok());
    ASSERT_TRUE(agg.AddForward(block0, Forward(1, Tensor({2}, 0, 1))).ok());
    ASSERT_TRUE(agg.AddForward(blocks, Forward(1, Tensor({2}, 0, 1))).ok());
    ASSERT_TRUE(agg.AddForward(head, Forward(1, Tensor({2}, 0, 1))).ok());
  }
  EXPECT_THAT(Names(agg.Snapshot()),
              ElementsAre("blocks.0.fc", "blocks.0.act", "blocks.0", "blocks", "head"));
  EXPECT_EQ(agg.declared_layers(), 6);
}

TEST(TraceAggregator, BackwardOnlyLayerIsListedWhereFirstSeen) {
  TraceAggregator agg;
  const auto a = MustDeclare(agg, Info("a"));
  const auto b = MustDeclare(agg, Info("b"));
  BackwardSample bs;
  bs.grad_norm = 1;
  ASSERT_TRUE(agg.AddBackward(b, bs).ok());
  ASSERT_TRUE(agg.AddForward(a, Forward(1, Tensor({2}, 0, 1))).ok());
  const TraceRecord r = agg.Snapshot();
  EXPECT_THAT(Names(r), ElementsAre("b", "a"));
  EXPECT_EQ(r.layers[0].forward_count, 0);
  EXPECT_EQ(r.layers[0].backward_count, 1);
}

TEST(TraceAggregator, ResetForgetsObservationsButKeepsLayersAndMetadata) {
  TraceMetadata md;
  md.model_name = "Net";
  TraceAggregator agg(md);
  const auto a = MustDeclare(agg, Info("a"));
  const auto b = MustDeclare(agg, Info("b"));
  ASSERT_TRUE(agg.AddForward(a, Forward(5, Tensor({2}, 0, 1, 1))).ok());
  ASSERT_TRUE(agg.AddForward(b, Forward(5, Tensor({2}, 0, 1))).ok());
  agg.ResetObservations();
  EXPECT_TRUE(agg.Snapshot().layers.empty());
  EXPECT_EQ(agg.declared_layers(), 2);
  EXPECT_EQ(agg.metadata().model_name, "Net");

  ASSERT_TRUE(agg.AddForward(b, Forward(1, Tensor({2}, 0, 1))).ok());
  ASSERT_TRUE(agg.AddForward(a, Forward(2, Tensor({2}, 0, 1))).ok());
  const TraceRecord r = agg.Snapshot();
  EXPECT_THAT(Names(r), ElementsAre("b", "a"));
  EXPECT_EQ(r.layers[1].forward_count, 1);
  EXPECT_EQ(r.layers[1].latency_ms_max, 2.0);
  EXPECT_FALSE(r.layers[1].has_nan);
  EXPECT_EQ(r.layers[1].params, 10);
  EXPECT_EQ(r.metadata.model_name, "Net");
}

TEST(TraceAggregator, SetMetadataIsVisibleInSnapshots) {
  TraceAggregator agg;
  TraceMetadata md;
  md.model_name = "M";
  md.total_time_ms = 12.5;
  agg.SetMetadata(md);
  EXPECT_EQ(agg.metadata(), md);
  EXPECT_EQ(agg.Snapshot().metadata, md);
}

TEST(TraceAggregator, ConcurrentWritersAndReaders) {
  constexpr int kThreads = 4;
  constexpr int kLayersPerThread = 8;
  constexpr int kCalls = 200;
  TraceAggregator agg;
  absl::Notification start;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.WaitForNotification();
      std::vector<TraceAggregator::LayerId> ids;
      for (int i = 0; i < kLayersPerThread; ++i) {
        // Every thread also declares the shared layer "shared".
        ids.push_back(agg.DeclareLayer(Info(absl::StrCat("t", t, ".l", i))).value());
      }
      const auto shared = agg.DeclareLayer(Info("shared")).value();
      for (int c = 0; c < kCalls; ++c) {
        for (auto id : ids) {
          EXPECT_TRUE(agg.AddForward(id, Forward(c + 1.0, Tensor({2}, 0, 1))).ok());
        }
        EXPECT_TRUE(agg.AddForward(shared, Forward(1.0, Tensor({2}, 0, 1))).ok());
        BackwardSample bs;
        bs.latency_ms = 1;
        EXPECT_TRUE(agg.AddBackward(shared, bs).ok());
      }
    });
  }
  threads.emplace_back([&] {  // A reader polling snapshots while writers run.
    start.WaitForNotification();
    for (int i = 0; i < 50; ++i) {
      const TraceRecord r = agg.Snapshot();
      for (const LayerTrace& l : r.layers) EXPECT_GE(l.forward_count + l.backward_count, 1);
    }
  });
  start.Notify();
  for (std::thread& th : threads) th.join();

  const TraceRecord r = agg.Snapshot();
  ASSERT_EQ(r.layers.size(), static_cast<size_t>(kThreads * kLayersPerThread + 1));
  EXPECT_EQ(agg.declared_layers(), kThreads * kLayersPerThread + 1);
  for (const LayerTrace& l : r.layers) {
    if (l.full_name == "shared") {
      EXPECT_EQ(l.forward_count, kThreads * kCalls);
      EXPECT_EQ(l.backward_count, kThreads * kCalls);
    } else {
      EXPECT_EQ(l.forward_count, kCalls);
      EXPECT_EQ(l.latency_ms_min, 1.0);
      EXPECT_EQ(l.latency_ms_max, static_cast<double>(kCalls));
      EXPECT_DOUBLE_EQ(*l.latency_ms_mean, (kCalls + 1) / 2.0);
    }
  }
}

}  // namespace
}  // namespace tracetorch
