// The tail of a session: Close() waits for the daemon's acknowledgement of the final snapshot, and
// counts what it did not get (TailOfASession).
//
// The real tracetorchd binary SIGKILLed while an agent streams to it, at chosen points (before its
// first snapshot, mid-snapshot, between a snapshot and the index, during an index write, at a
// random moment; sometimes twice), then restarted: the agent resumes and finishes, and in every
// run each event the agent produced is in the final trace or counted as dropped, exactly:
//   events in the trace + dropped (+ rejected) == produced.
// With the agent's replay buffer large enough for the run, nothing is lost at all: the agent
// re-sends what the daemon had not made durable, so the only drops are the agent's own queue-full
// drops, and the on_nan op graph sent before the kill reaches the final trace. With a small
// buffer, what fell out of it is counted as dropped, exactly once.
//
// The pause points (daemon/core/crash_point.h) block the daemon where the test wants it dead and
// leave a marker file; the test waits for the marker (a handshake) and kills. Runs are seeded
// (the seed is printed) so that a failing run replays.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/daemon_client.h"
#include "daemon/core/crash_point.h"
#include "daemon/core/session.h"
#include "daemon/testing/daemon_process.h"
#include "daemon/testing/test_util.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "protocol/events.h"
#include "service_client/service_client.h"
#include "trace/atomic_file.h"
#include "trace/json.h"
#include "trace/op_graph.h"
#include "trace/op_graph_json.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {
namespace {

using test_util::TempDir;
using test_util::WaitFor;

// One tracetorchd child process with the test's snapshot interval (also the index interval) and
// pause point ("" for none).
std::unique_ptr<test_util::DaemonProcess> StartDaemon(const std::string& dir,
                                                      double snapshot_interval_s,
                                                      const std::string& pause) {
  const std::string interval = absl::StrCat(snapshot_interval_s);
  return std::make_unique<test_util::DaemonProcess>(
      TRACETORCHD_BINARY, dir,
      std::vector<std::string>{"--snapshot-interval", interval, "--index-interval", interval,
                               "--log-level", "warn"},
      kCrashPointEnv, pause);
}

std::vector<protocol::LayerDecl> Layers() {
  return {{0, {"fc", "Linear", "net.fc", 2, 110}},
          {1, {"act", "ReLU", "net.act", 2, 0}},
          {2, {"net", "Net", "net", 1, 0}}};
}

// Counts what it offers the client: every event it tries to enqueue, accepted or not.
class Producer {
 public:
  explicit Producer(client::DaemonClient* c) : c_(c) {}

  void Step() {
    for (uint32_t layer = 0; layer < 3; ++layer) {
      ForwardSample f;
      f.latency_ms = 0.5 + layer;
      f.outputs = {{{4, 8}, "torch.float32", "cpu", TensorStats{0.1, 0.5, -1.0, 1.0, 0, 0}}};
      c_->EnqueueForward(protocol::ToForwardEvent(layer, step_, f));
      ++produced_;
    }
    for (int layer = 2; layer >= 0; --layer) {
      BackwardSample b;
      b.latency_ms = 0.25;
      b.grad_norm = 1.0;
      c_->EnqueueBackward({static_cast<uint32_t>(layer), step_, b});
      ++produced_;
    }
    ++step_;
  }
  uint64_t produced() const { return produced_; }

 private:
  client::DaemonClient* const c_;
  uint64_t step_ = 0;
  uint64_t produced_ = 0;
};

enum class KillAt { kBeforeFirstSnapshot, kMidSnapshot, kSnapshotNotIndexed, kIndexWrite, kRandom };

const char* Name(KillAt k) {
  switch (k) {
    case KillAt::kBeforeFirstSnapshot:
      return "before the first snapshot";
    case KillAt::kMidSnapshot:
      return "mid-snapshot";
    case KillAt::kSnapshotNotIndexed:
      return "after a snapshot, before the index";
    case KillAt::kIndexWrite:
      return "during an index write";
    case KillAt::kRandom:
      return "at a random moment";
  }
  return "?";
}

const char* PausePoint(KillAt k) {
  switch (k) {
    case KillAt::kMidSnapshot:
      return "snapshot";
    case KillAt::kSnapshotNotIndexed:
      return "snapshot-written";
    case KillAt::kIndexWrite:
      return "index";
    default:
      return nullptr;
  }
}

// Streams until `kill_now` holds, for at most 20 s: a step, a short flush, and a millisecond's
// pause, the pace of a small training loop (so that the daemon's snapshots and index writes come
// between steps; the kill itself waits for `kill_now`, not for time).
template <typename Pred>
bool StreamUntil(Producer& p, client::DaemonClient& c, Pred kill_now) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    if (kill_now()) return true;
    p.Step();
    (void)c.Flush(absl::Milliseconds(50));
    absl::SleepFor(absl::Milliseconds(1));
  }
  return kill_now();
}

absl::StatusOr<v1::SessionIndex> ReadIndex(const std::string& data_dir) {
  absl::StatusOr<std::string> text = ReadFileToString(data_dir + "/index.json");
  if (!text.ok()) return text.status();
  v1::SessionIndex index;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(*text, &index, parse).ok()) {
    return absl::InvalidArgumentError("index.json does not parse");
  }
  return index;
}

// The op graph of a NaN origin (ops="on_nan"), set once right after the first connect.
OpGraph NanGraph() {
  OpGraph g;
  g.model_name = "Crash";
  g.source = "eager";
  g.step = 0;
  ModulePass root;
  root.type = "Net";
  g.modules = {root};
  return g;
}

// How the agent's replay buffer is sized for a run.
enum class Replay {
  kLarge,  // Holds the whole run: nothing may be lost.
  kSmall,  // A few batches: the oldest unacknowledged fall out and count as dropped.
};

// Adds to `*lost` the events the daemon counted as lost (sent, never durable, not re-sent).
void OneRun(int run, uint32_t seed, Replay replay, uint64_t* lost) {
  std::mt19937 rng(seed);
  const KillAt kill_at = static_cast<KillAt>(run % 5);
  const bool twice = run % 3 == 2;
  SCOPED_TRACE(absl::StrCat("run ", run, " seed ", seed, ": killed ", Name(kill_at),
                            twice ? ", then again at a random moment" : "",
                            replay == Replay::kLarge ? "; large" : "; small", " replay buffer"));
  TempDir dir("ttcrash");
  const std::string marker = dir.path() + "/paused";
  const uint64_t nth = 1 + rng() % 3;
  const char* point = PausePoint(kill_at);
  const double interval = kill_at == KillAt::kBeforeFirstSnapshot ? 60.0 : 0.05;
  auto daemon = StartDaemon(dir.path(), interval,
                            point == nullptr ? "" : absl::StrCat(point, ":", nth, ":", marker));

  client::DaemonClientOptions o;
  o.address = absl::StrCat("unix://", daemon->socket_path());
  o.identity = protocol::CurrentProcessIdentity();
  o.identity.model_name = "Crash";
  o.queue_capacity = 256;
  o.max_batch_events = 64;  // Several frames per write: a kill can cut between them.
  o.flush_interval = absl::Milliseconds(2);
  o.initial_backoff = absl::Milliseconds(5);
  o.max_backoff = absl::Milliseconds(40);
  o.replay_capacity = replay == Replay::kLarge ? 1 << 16 : 96;
  auto created = client::DaemonClient::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  client::DaemonClient& c = **created;
  c.DeclareLayers(Layers());
  Producer p(&c);
  ASSERT_TRUE(c.WaitUntilConnected(absl::Seconds(10)).ok()) << c.stats().last_error;
  const std::string id = c.session_id();
  if (replay == Replay::kLarge) {
    NanOrigin origin;
    origin.layer = "net.act";
    origin.step = 0;
    origin.op = "div_1_4";
    c.SetNanOrigin(origin);
    c.SetOpGraph(OpGraphToJson(NanGraph(), 0));
  }

  // Phase 1: stream until the kill point.
  const uint64_t kill_after = 6 + rng() % 900;
  if (point != nullptr) {
    ASSERT_TRUE(StreamUntil(p, c, [&] { return std::filesystem::exists(marker); }))
        << "the daemon never paused at " << point;
    // Events keep arriving while the housekeeping thread is paused: received, never durable.
    for (uint64_t i = 0, n = rng() % 20; i < n; ++i) p.Step();
    (void)c.Flush(absl::Milliseconds(50));
  } else {
    ASSERT_TRUE(StreamUntil(p, c, [&] { return c.stats().sent_events >= kill_after; }));
  }
  daemon->Kill();

  // Phase 2: the daemon is away; the agent queues and, past its queue, drops.
  for (uint64_t i = 0, n = rng() % 60; i < n; ++i) {
    p.Step();
    (void)c.Flush(absl::Milliseconds(2));
  }

  // Phase 3: restarted (sometimes killed again, with no pause point), the agent resumes.
  uint64_t connects = c.stats().connects;
  daemon = StartDaemon(dir.path(), 0.02 + 0.01 * (rng() % 5), "");
  ASSERT_TRUE(WaitFor([&] { return c.stats().connects > connects; })) << c.stats().last_error;
  if (twice) {
    const uint64_t sent = c.stats().sent_events;
    const uint64_t more = 1 + rng() % 300;
    ASSERT_TRUE(StreamUntil(p, c, [&] { return c.stats().sent_events >= sent + more; }));
    daemon->Kill();
    for (uint64_t i = 0, n = rng() % 30; i < n; ++i) p.Step();
    connects = c.stats().connects;
    daemon = StartDaemon(dir.path(), 0.05, "");
    ASSERT_TRUE(WaitFor([&] { return c.stats().connects > connects; })) << c.stats().last_error;
  }
  EXPECT_EQ(c.session_id(), id) << "the resume started another session";
  for (uint64_t i = 0, n = 20 + rng() % 100; i < n; ++i) {
    p.Step();
    ASSERT_TRUE(c.Flush(absl::Seconds(10)).ok());
  }
  ASSERT_TRUE(c.Close(absl::Seconds(10)).ok()) << c.stats().last_error;
  const client::DaemonClientStats stats = c.stats();
  ASSERT_EQ(stats.sent_events + stats.dropped_events, p.produced());

  // The live daemon's view, once it has taken the End.
  auto service =
      service_client::TraceServiceClient::Create(absl::StrCat("unix://", daemon->service_path()));
  ASSERT_TRUE(service.ok()) << service.status();
  std::optional<v1::SessionInfo> info;
  ASSERT_TRUE(WaitFor([&] {
    auto list = (*service)->ListSessions();
    if (!list.ok() || list->sessions_size() != 1) return false;
    info = list->sessions(0);
    return info->state() == v1::SESSION_STATE_FINISHED;
  })) << (info ? info->DebugString() : "no session listed");
  EXPECT_EQ(info->session_id(), id);
  EXPECT_EQ(info->events() + info->dropped_events() + info->rejected_events(), p.produced())
      << "events " << info->events() << " dropped " << info->dropped_events() << " rejected "
      << info->rejected_events() << "; agent sent " << stats.sent_events << " dropped "
      << stats.dropped_events;
  if (replay == Replay::kLarge) {
    // Nothing the agent sent is lost: the only drops are its own (queue full while the daemon
    // was away).
    EXPECT_EQ(stats.replay_evicted_events, 0u);
    EXPECT_EQ(info->dropped_events(), stats.dropped_events)
        << "events " << info->events() << "; agent sent " << stats.sent_events << ", re-sent "
        << stats.resent_events;
    EXPECT_EQ(info->events(), p.produced() - stats.dropped_events);
  }
  service->reset();
  ASSERT_EQ(daemon->Stop(), 0);

  // What is on disk says the same, and the trace holds exactly the events counted.
  absl::StatusOr<TraceRecord> record = ReadTraceFile(dir.path() + "/data/sessions/" + id + ".json");
  ASSERT_TRUE(record.ok()) << record.status();
  std::optional<protocol::SessionIndexEntry> accounting = TakeSnapshotAccounting(&*record);
  ASSERT_TRUE(accounting.has_value());
  uint64_t in_trace = 0;
  for (const LayerTrace& l : record->layers) {
    in_trace += static_cast<uint64_t>(l.forward_count + l.backward_count);
  }
  const protocol::SessionInfo& on_disk = accounting->info;
  EXPECT_EQ(on_disk.events, in_trace);
  EXPECT_EQ(in_trace + on_disk.dropped_events + on_disk.rejected_events, p.produced())
      << "in trace " << in_trace << " dropped " << on_disk.dropped_events;
  *lost += accounting->lost_events;
  if (replay == Replay::kLarge) {
    EXPECT_EQ(accounting->lost_events, 0u);
    EXPECT_EQ(in_trace, p.produced() - stats.dropped_events);
    ASSERT_NE(record->op_graph, nullptr)
        << "the op graph sent before the kill is not in the final trace";
    EXPECT_EQ(*record->op_graph, NanGraph());
    ASSERT_TRUE(record->metadata.nan_origin.has_value());
    EXPECT_EQ(record->metadata.nan_origin->op, "div_1_4");
  }
  absl::StatusOr<v1::SessionIndex> index = ReadIndex(dir.path() + "/data");
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(index->sessions_size(), 1);
  EXPECT_EQ(index->sessions(0).info().session_id(), id);
  EXPECT_EQ(index->sessions(0).info().state(), v1::SESSION_STATE_FINISHED);
  EXPECT_EQ(index->sessions(0).info().events(), in_trace);
  EXPECT_EQ(index->sessions(0).info().dropped_events(), on_disk.dropped_events);
}

// The stream position a session's snapshot file holds (events + rejected + lost); nullopt when
// there is no whole snapshot file.
std::optional<uint64_t> OnDisk(const std::string& data_dir, const std::string& id) {
  absl::StatusOr<TraceRecord> record = ReadTraceFile(data_dir + "/sessions/" + id + ".json");
  if (!record.ok()) return std::nullopt;
  std::optional<protocol::SessionIndexEntry> a = TakeSnapshotAccounting(&*record);
  if (!a.has_value()) return std::nullopt;
  return a->info.events + a->info.rejected_events + a->lost_events;
}

// An agent that streams `steps` steps (no periodic snapshot comes: --snapshot-interval 60) and
// closes with the exit path's one-second budget.
struct Tail {
  absl::Status closed;
  client::DaemonClientStats stats;
  std::string id;
  uint64_t produced = 0;
};
Tail StreamAndClose(const std::string& socket, int steps) {
  client::DaemonClientOptions o;
  o.address = absl::StrCat("unix://", socket);
  o.identity = protocol::CurrentProcessIdentity();
  o.identity.model_name = "Tail";
  auto created = client::DaemonClient::Create(o);
  EXPECT_TRUE(created.ok()) << created.status();
  client::DaemonClient& c = **created;
  c.DeclareLayers(Layers());
  Producer p(&c);
  EXPECT_TRUE(c.WaitUntilConnected(absl::Seconds(10)).ok()) << c.stats().last_error;
  for (int i = 0; i < steps; ++i) p.Step();
  Tail t;
  t.id = c.session_id();
  t.closed = c.Close(absl::Seconds(1));
  t.stats = c.stats();
  t.produced = p.produced();
  return t;
}

// Close() returns once the daemon has written the session's final snapshot and said so: the
// file holds every event the moment Close returns, and nothing is counted as not durable.
TEST(TailOfASession, CloseReturnsOnceTheFinalSnapshotIsOnDisk) {
  TempDir dir("tttail");
  auto daemon = StartDaemon(dir.path(), 60.0, "");
  const Tail t = StreamAndClose(daemon->socket_path(), 50);
  ASSERT_TRUE(t.closed.ok()) << t.closed;
  EXPECT_EQ(t.stats.not_durable_events, 0u);
  EXPECT_EQ(t.stats.durable_events, t.produced);
  EXPECT_EQ(OnDisk(dir.path() + "/data", t.id), t.produced);
}

// The daemon stops between an agent's End and the session's final snapshot (paused there, then
// SIGKILLed): Close() waits out its budget for the acknowledgement, fails, and counts the tail it
// never saw made durable; the restarted daemon has none of it (nothing was ever written), so
// every event sent is on disk or in that count.
TEST(TailOfASession, ADaemonKilledBeforeTheFinalSnapshotLeavesTheTailCounted) {
  TempDir dir("tttail");
  const std::string marker = dir.path() + "/paused";
  auto daemon = StartDaemon(dir.path(), 60.0, absl::StrCat("end:1:", marker));
  const absl::Time start = absl::Now();
  const Tail t = StreamAndClose(daemon->socket_path(), 50);
  EXPECT_TRUE(std::filesystem::exists(marker)) << "the daemon never paused at the End";
  daemon->Kill();
  EXPECT_EQ(t.closed.code(), absl::StatusCode::kDeadlineExceeded) << t.closed;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(t.stats.sent_events, t.produced);
  EXPECT_EQ(t.stats.not_durable_events, t.produced);
  daemon = StartDaemon(dir.path(), 60.0, "");
  const std::optional<uint64_t> on_disk = OnDisk(dir.path() + "/data", t.id);
  EXPECT_GE(on_disk.value_or(0) + t.stats.not_durable_events, t.stats.sent_events);
}

uint32_t BaseSeed() {
  const char* env_seed = std::getenv("TRACETORCH_CRASH_SEED");
  const uint32_t base = env_seed != nullptr
                            ? static_cast<uint32_t>(std::strtoul(env_seed, nullptr, 10))
                            : static_cast<uint32_t>(absl::ToUnixSeconds(absl::Now()));
  std::printf("TRACETORCH_CRASH_SEED=%u\n", base);
  return base;
}

// 25 kills (and 8 more, at a random moment, in the runs killed twice).
TEST(DaemonKilled, NothingTheReplayBufferHoldsIsLostAfterAnyRestart) {
  const uint32_t base = BaseSeed();
  uint64_t lost = 0;
  for (int run = 0; run < 25; ++run) {
    OneRun(run, base + static_cast<uint32_t>(run), Replay::kLarge, &lost);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(lost, 0u);
}

// 20 kills (and 7 more); the buffer holds 96 events, so kills lose some (which the test requires,
// so that it checks the counting of what fell out of the buffer).
TEST(DaemonKilled, WithASmallReplayBufferEveryEventIsInTheTraceOrCountedAsDropped) {
  const uint32_t base = BaseSeed();
  uint64_t lost = 0;
  for (int run = 0; run < 20; ++run) {
    OneRun(run, base + static_cast<uint32_t>(run), Replay::kSmall, &lost);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(lost, 0u) << "no run lost anything: the small buffer was not exercised";
  std::printf("events lost (counted as dropped) over the 20 runs: %llu\n",
              static_cast<unsigned long long>(lost));
}

}  // namespace
}  // namespace tracetorch::daemon
