// The flight monitor's state machine over real sessions, real flight recorder regions (written in
// this process, read through the daemon's own mapping) and real child processes, driven by a fake
// clock: stalls and recovery, the stall threshold, idle sessions, exits, bundles on disk.
#include "daemon/core/flight_monitor.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "daemon/core/forensics.h"
#include "daemon/testing/messages.h"
#include "daemon/testing/test_util.h"
#include "flight/recorder.h"
#include "gtest/gtest.h"
#include "tracetorch/v1/service.pb.h"

extern char** environ;

namespace tracetorch::daemon {
namespace {

using test_util::Batch;
using test_util::MakeHello;
using test_util::Table;

constexpr int64_t kMs = 1'000'000;

// A child process that sleeps until killed (posix_spawn: no fork of this threaded process).
class Child {
 public:
  Child() {
    const char* argv[] = {"sleep", "600", nullptr};
    EXPECT_EQ(posix_spawnp(&pid_, "sleep", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Reap();
    }
  }
  pid_t pid() const { return pid_; }
  void Reap() {
    int status;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

class FakeCapturer final : public StackCapturer {
 public:
  std::vector<ThreadStacksResult> Capture(const StackTarget& target) override {
    ++calls;
    last = target;
    return {{.tool = "fake", .text = "#0 somewhere", .taken = absl::UnixEpoch()}};
  }
  int calls = 0;
  StackTarget last;
};

class FlightMonitorTest : public ::testing::Test {
 protected:
  FlightMonitorTest() {
    session_ = std::make_shared<Session>("s1", MakeHello(), PeerCredentials{42, 1000, 1000},
                                         absl::Now(), SessionLimits{}, Thresholds{});
    EXPECT_TRUE(session_->DeclareLayers(Table(5)).ok());
    session_->AddBatchBytes(Batch({0, 1, 2, 3, 4}, 0, 3).SerializeAsString()).value();
    recorder_ = *flight::Recorder::Create();
    for (int i = 0; i < 5; ++i) recorder_->AddName(i, absl::StrCat("net.l", i));
  }

  std::unique_ptr<FlightMonitor> Monitor(FlightMonitorOptions options = {}) {
    if (options.stall_rule.floor == absl::Seconds(60)) options.stall_rule.floor = absl::Seconds(1);
    return std::make_unique<FlightMonitor>(options, &capturer_, [this] { return now_; });
  }

  std::shared_ptr<FlightRegion> Region() {
    absl::StatusOr<std::shared_ptr<FlightRegion>> r = FlightRegion::Adopt(dup(recorder_->fd()));
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }

  // Steps [first, first + n), `gap` apart on the recorder's clock, the last one in layer 2.
  void Steps(uint64_t first, uint64_t n, int64_t gap) {
    for (uint64_t s = first; s < first + n; ++s) {
      const int64_t t = static_cast<int64_t>(s + 1) * gap;
      recorder_->BeginStep(s, t);
      recorder_->Move(flight::Phase::kForward, flight::Event::kEnter, 2, s, t);
    }
  }

  std::vector<v1::ForensicBundle> Bundles(FlightMonitor& m) {
    absl::StatusOr<std::vector<std::string>> bytes = m.Bundles("s1", /*now=*/false);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    std::vector<v1::ForensicBundle> out;
    for (const std::string& b : *bytes) out.emplace_back().ParseFromString(b);
    return out;
  }

  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  FakeCapturer capturer_;
  std::shared_ptr<Session> session_;
  std::unique_ptr<flight::Recorder> recorder_;
};

TEST_F(FlightMonitorTest, StallsAfterTheThresholdTakesStacksAndRecovers) {
  auto monitor = Monitor();
  recorder_->SetRecording(true, 1);
  Steps(0, 3, 10 * kMs);
  Child child;
  monitor->Watch(session_, {.pid = child.pid(), .uid = 7, .probe = nullptr, .region = Region()});
  monitor->Poll();
  FlightStatus f = session_->flight();
  EXPECT_TRUE(f.recorder);
  EXPECT_FALSE(f.stalled);
  EXPECT_EQ(f.position, "step 2, forward, in net.l2");
  EXPECT_EQ(f.layer, "net.l2");
  EXPECT_EQ(f.median_step, absl::Milliseconds(10));
  EXPECT_EQ(f.stall_threshold, absl::Seconds(1));  // The floor: 10 x 10 ms is less.

  now_ += absl::Milliseconds(999);
  monitor->Poll();
  EXPECT_FALSE(session_->flight().stalled);
  now_ += absl::Milliseconds(1);
  monitor->Poll();
  f = session_->flight();
  EXPECT_TRUE(f.stalled);
  EXPECT_EQ(f.stalls, 1u);
  EXPECT_EQ(f.stalled_since, now_);
  EXPECT_TRUE(session_->Info().flight.stalled);
  EXPECT_EQ(session_->Info().state, SessionState::kLive);  // Older tools: still live.
  EXPECT_EQ(capturer_.calls, 1);
  EXPECT_EQ(capturer_.last.pid, child.pid());
  EXPECT_EQ(capturer_.last.uid, 7);
  EXPECT_EQ(monitor->stats().stalled, 1u);

  std::vector<v1::ForensicBundle> bundles = Bundles(*monitor);
  ASSERT_EQ(bundles.size(), 1u);
  EXPECT_EQ(bundles[0].reason(), "stalled");
  EXPECT_EQ(bundles[0].snapshot().session().flight().position(), "step 2, forward, in net.l2");
  EXPECT_TRUE(bundles[0].snapshot().session().flight().stalled());
  ASSERT_EQ(bundles[0].stacks_size(), 1);
  EXPECT_EQ(bundles[0].stacks(0).text(), "#0 somewhere");
  EXPECT_EQ(bundles[0].steps_size(), 3);

  // Still stalled: no second bundle, no second capture.
  now_ += absl::Seconds(5);
  monitor->Poll();
  EXPECT_EQ(capturer_.calls, 1);
  EXPECT_EQ(Bundles(*monitor).size(), 1u);

  // It moves: live again.
  Steps(3, 1, 10 * kMs);
  monitor->Poll();
  f = session_->flight();
  EXPECT_FALSE(f.stalled);
  EXPECT_EQ(f.stalls, 1u);
  EXPECT_EQ(f.position, "step 3, forward, in net.l2");
  EXPECT_EQ(monitor->stats().stalled, 0u);
  // And stalls again later: a second episode.
  now_ += absl::Seconds(2);
  monitor->Poll();
  EXPECT_TRUE(session_->flight().stalled);
  EXPECT_EQ(session_->flight().stalls, 2u);
  EXPECT_EQ(monitor->stats().stalls_total, 2u);
}

TEST_F(FlightMonitorTest, ThresholdIsFactorTimesTheMedianStepAboveTheFloor) {
  auto monitor = Monitor();
  recorder_->SetRecording(true, 1);
  Steps(0, 5, 1000 * kMs);  // 1 s steps: 10 x 1 s = 10 s.
  monitor->Watch(session_, {.region = Region()});
  monitor->Poll();
  EXPECT_EQ(session_->flight().stall_threshold, absl::Seconds(10));
  now_ += absl::Seconds(9);
  monitor->Poll();
  EXPECT_FALSE(session_->flight().stalled);
  now_ += absl::Seconds(1);
  monitor->Poll();
  EXPECT_TRUE(session_->flight().stalled);
}

TEST_F(FlightMonitorTest, ANotRecordingProcessNeverStalls) {
  auto monitor = Monitor();
  recorder_->SetRecording(true, 1);
  Steps(0, 3, 10 * kMs);
  recorder_->SetRecording(false, 2);  // Between `with` blocks.
  monitor->Watch(session_, {.region = Region()});
  monitor->Poll();
  now_ += absl::Hours(1);
  monitor->Poll();
  EXPECT_FALSE(session_->flight().stalled);
  EXPECT_EQ(session_->flight().phase, "idle");
  EXPECT_EQ(capturer_.calls, 0);
}

TEST_F(FlightMonitorTest, AnOldAgentWithoutRecorderIsFollowedForItsExitOnly) {
  auto monitor = Monitor();
  Child child;
  absl::StatusOr<std::unique_ptr<ProcessProbe>> probe = ProcessProbe::Open(child.pid());
  ASSERT_TRUE(probe.ok()) << probe.status();
  monitor->Watch(session_, {.pid = child.pid(), .probe = *std::move(probe)});
  monitor->Poll();
  now_ += absl::Hours(1);
  monitor->Poll();
  EXPECT_FALSE(session_->flight().recorder);
  EXPECT_FALSE(session_->flight().stalled);
  session_->Abort(now_);
  kill(child.pid(), SIGKILL);
  ASSERT_TRUE(test_util::WaitFor([&] {
    monitor->Poll();
    return monitor->stats().watched == 0;
  }));
  std::vector<v1::ForensicBundle> bundles = Bundles(*monitor);
  ASSERT_EQ(bundles.size(), 1u);
  EXPECT_EQ(bundles[0].reason(), "aborted");
  const v1::ProcessExit& exit = bundles[0].snapshot().session().flight().exit();
  EXPECT_TRUE(exit.known());
  EXPECT_EQ(exit.signal(), SIGKILL);
  EXPECT_EQ(exit.description(), "killed by SIGKILL");
  EXPECT_EQ(bundles[0].spans_size(), 0);
}

TEST_F(FlightMonitorTest, AbortedProcessGetsItsBundleWithTheRingAndItsExitSignal) {
  test_util::TempDir dir;
  FlightMonitorOptions options;
  options.data_dir = dir.path();
  std::filesystem::create_directories(dir.path() + "/sessions");
  auto monitor = Monitor(options);
  recorder_->SetRecording(true, 1);
  Steps(0, 3, 10 * kMs);
  recorder_->Span(flight::SpanKind::kForward, 2, 2, 30 * kMs, 5 * kMs, flight::kSpanNonFinite);
  Child child;
  monitor->Watch(
      session_,
      {.pid = child.pid(), .probe = *ProcessProbe::Open(child.pid()), .region = Region()});
  monitor->Poll();
  kill(child.pid(), SIGKILL);
  session_->Abort(now_);
  ASSERT_TRUE(test_util::WaitFor([&] {
    monitor->Poll();
    return monitor->stats().watched == 0;
  }));
  std::vector<v1::ForensicBundle> bundles = Bundles(*monitor);
  ASSERT_EQ(bundles.size(), 1u);
  const v1::ForensicBundle& b = bundles[0];
  EXPECT_EQ(b.reason(), "aborted");
  EXPECT_EQ(b.snapshot().session().state(), v1::SESSION_STATE_ABORTED);
  EXPECT_EQ(b.snapshot().session().flight().exit().signal(), SIGKILL);
  EXPECT_EQ(b.snapshot().session().flight().position(), "step 2, forward, in net.l2");
  ASSERT_EQ(b.spans_size(), 1);
  EXPECT_EQ(b.spans(0).layer(), "net.l2");
  EXPECT_TRUE(b.spans(0).non_finite());
  EXPECT_EQ(b.spans(0).duration_ns(), 5 * kMs);
  // The history of the layers around the position (and the layer with a non-finite span).
  EXPECT_GT(b.snapshot().history_size(), 0);
  EXPECT_EQ(b.snapshot().record().layers_size(), 5);
  // Written to disk: a daemon that restarts (or forgets the session) reads it back.
  EXPECT_TRUE(std::filesystem::exists(BundlePath(dir.path(), "s1")));
  auto later = Monitor(options);
  absl::StatusOr<std::vector<std::string>> read = later->Bundles("s1", /*now=*/false);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->size(), 1u);
  v1::ForensicBundle again;
  ASSERT_TRUE(again.ParseFromString((*read)[0]));
  EXPECT_EQ(again.spans(0).layer(), "net.l2");
  EXPECT_EQ(session_->flight().bundles, 1u);
}

TEST_F(FlightMonitorTest, AnAbortedSessionWhoseProcessRunsOnWaitsForTheGrace) {
  FlightMonitorOptions options;
  options.exit_grace = absl::Seconds(2);
  auto monitor = Monitor(options);
  Child child;
  monitor->Watch(session_, {.pid = child.pid(), .probe = *ProcessProbe::Open(child.pid())});
  session_->Abort(now_);
  monitor->Poll();
  now_ += absl::Seconds(1);
  monitor->Poll();
  EXPECT_TRUE(Bundles(*monitor).empty());  // It may still reconnect.
  now_ += absl::Seconds(1);
  monitor->Poll();
  std::vector<v1::ForensicBundle> bundles = Bundles(*monitor);
  ASSERT_EQ(bundles.size(), 1u);
  EXPECT_FALSE(bundles[0].snapshot().session().flight().exit().known());
  EXPECT_EQ(bundles[0].snapshot().session().flight().exit().description(),
            "still running (its connection to the daemon was lost)");
}

TEST_F(FlightMonitorTest, TheFirstNanOriginGetsOneBundle) {
  auto monitor = Monitor();
  monitor->Watch(session_, {});
  monitor->Poll();
  EXPECT_TRUE(Bundles(*monitor).empty());
  v1::EventBatch nan = Batch({0}, 3, 1);
  nan.mutable_nan_origin()->set_layer("net.l3");
  nan.mutable_nan_origin()->set_step(3);
  nan.mutable_nan_origin()->set_is_nan(true);
  session_->AddBatchBytes(nan.SerializeAsString()).value();
  monitor->Poll();
  monitor->Poll();
  std::vector<v1::ForensicBundle> bundles = Bundles(*monitor);
  ASSERT_EQ(bundles.size(), 1u);
  EXPECT_EQ(bundles[0].reason(), "nan");
  EXPECT_EQ(bundles[0].snapshot().record().metadata().nan_origin().layer(), "net.l3");
  EXPECT_EQ(bundles[0].snapshot().session().flight().nan_origin().layer(), "net.l3");
  EXPECT_GT(bundles[0].snapshot().session().flight().nan_found_unix_ns(), 0);
  bool kept_origin_history = false;
  for (const v1::LayerHistory& h : bundles[0].snapshot().history()) {
    kept_origin_history |= h.full_name() == "net.l3";
  }
  EXPECT_TRUE(kept_origin_history);
}

TEST_F(FlightMonitorTest, NowTakesABundleFromALiveRecorder) {
  auto monitor = Monitor();
  recorder_->SetRecording(true, 1);
  Steps(0, 2, 10 * kMs);
  monitor->Watch(session_, {.region = Region()});
  absl::StatusOr<std::vector<std::string>> bytes = monitor->Bundles("s1", /*now=*/true);
  ASSERT_TRUE(bytes.ok());
  ASSERT_EQ(bytes->size(), 1u);
  v1::ForensicBundle b;
  ASSERT_TRUE(b.ParseFromString((*bytes)[0]));
  EXPECT_EQ(b.reason(), "now");
  EXPECT_EQ(monitor->Bundles("unknown", true)->size(), 0u);
}

TEST_F(FlightMonitorTest, AResumeKeepsTheStallCountAndBundles) {
  auto monitor = Monitor();
  recorder_->SetRecording(true, 1);
  Steps(0, 3, 10 * kMs);
  monitor->Watch(session_, {.region = Region()});
  monitor->Poll();
  now_ += absl::Seconds(2);
  monitor->Poll();
  ASSERT_TRUE(session_->flight().stalled);
  monitor->Watch(session_, {.region = Region()});  // The agent reconnected.
  EXPECT_FALSE(session_->flight().stalled);
  EXPECT_EQ(session_->flight().stalls, 1u);
  EXPECT_EQ(Bundles(*monitor).size(), 1u);
}

}  // namespace
}  // namespace tracetorch::daemon
