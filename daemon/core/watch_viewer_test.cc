// The per-viewer state machine on its own: fed link states, passes at chosen times and versions,
// it must decide exactly the steps of daemon/core/watch_hub.h.
#include "daemon/core/watch_viewer.h"

#include <cstdint>
#include <optional>

#include "gtest/gtest.h"

namespace tracetorch::daemon {
namespace {

using Kind = WatchViewer::Step::Kind;
using Phase = WatchViewer::Phase;

constexpr absl::Duration kInterval = absl::Milliseconds(100);
const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);  // On a tick.

WatchViewer::Link Idle() { return {}; }
WatchViewer::Link Writing() { return {.writing = true}; }

WatchViewer::Pass At(absl::Time now) { return {.now = now}; }
WatchViewer::Pass ShuttingDownAt(absl::Time now) { return {.now = now, .shutting_down = true}; }
WatchViewer::Pass ForceCloseAt(absl::Time now) {
  return {.now = now, .shutting_down = true, .force_close = true};
}

// A version source that counts its reads.
struct Version {
  uint64_t value = 0;
  int reads = 0;
  uint64_t operator()() {
    ++reads;
    return value;
  }
};

// A viewer that was sent its first state (version 1) at kStart.
WatchViewer Streaming(Version& version) {
  WatchViewer v(kInterval, kStart);
  version.value = 1;
  EXPECT_EQ(v.Next(Idle(), At(kStart), std::ref(version)).kind, Kind::kSendState);
  EXPECT_EQ(v.StateSent(1, std::nullopt, kStart), 1u);
  return v;
}

TEST(WatchTickAtOrAfter, TicksAreMultiplesOfTheIntervalSinceTheEpoch) {
  EXPECT_EQ(WatchTickAtOrAfter(kStart, kInterval), kStart);
  EXPECT_EQ(WatchTickAtOrAfter(kStart + absl::Nanoseconds(1), kInterval), kStart + kInterval);
  EXPECT_EQ(WatchTickAtOrAfter(kStart + absl::Milliseconds(99), kInterval), kStart + kInterval);
  EXPECT_EQ(WatchTickAtOrAfter(absl::FromUnixMillis(1234), absl::Milliseconds(500)),
            absl::FromUnixMillis(1500));
}

TEST(WatchTickAtOrAfter, APhaseShiftsEveryTick) {
  const absl::Duration phase = absl::Milliseconds(30);
  EXPECT_EQ(WatchTickAtOrAfter(kStart, kInterval, phase), kStart + phase);
  EXPECT_EQ(WatchTickAtOrAfter(kStart + phase, kInterval, phase), kStart + phase);
  EXPECT_EQ(WatchTickAtOrAfter(kStart + phase + absl::Nanoseconds(1), kInterval, phase),
            kStart + phase + kInterval);
  EXPECT_EQ(WatchTickAtOrAfter(kStart - absl::Milliseconds(80), kInterval, phase),
            kStart - absl::Milliseconds(70));
  // A phase of an interval or more wraps around.
  EXPECT_EQ(WatchTickAtOrAfter(kStart, kInterval, kInterval + phase), kStart + phase);
}

TEST(WatchViewer, ItsTicksKeepItsPhase) {
  const absl::Duration phase = absl::Milliseconds(30);
  WatchViewer v(kInterval, kStart, phase);
  Version version;
  version.value = 1;
  ASSERT_EQ(v.Next(Idle(), At(kStart), std::ref(version)).kind, Kind::kSendState);
  v.StateSent(1, std::nullopt, kStart);
  // Off-tick first state: the first tick a whole interval later, on its phase.
  const absl::Time tick = kStart + kInterval + phase;
  EXPECT_EQ(v.wake_at(), tick);
  EXPECT_EQ(v.Next(Idle(), At(tick - absl::Milliseconds(1)), std::ref(version)).kind,
            Kind::kNothing);
  version.value = 2;
  ASSERT_EQ(v.Next(Idle(), At(tick), std::ref(version)).kind, Kind::kSendState);
  v.StateSent(2, std::nullopt, tick);
  EXPECT_EQ(v.wake_at(), tick + kInterval);
  // Nothing new at the next tick: the one after, still on its phase.
  EXPECT_EQ(v.Next(Idle(), At(tick + kInterval), std::ref(version)).kind, Kind::kNothing);
  EXPECT_EQ(v.wake_at(), tick + 2 * kInterval);
}

TEST(WatchViewer, TheFirstStateIsDueAtOnceOffTick) {
  const absl::Time off_tick = kStart + absl::Milliseconds(37);
  WatchViewer v(kInterval, off_tick);
  Version version{.value = 7};
  EXPECT_EQ(v.phase(), Phase::kFirst);
  EXPECT_EQ(v.wake_at(), absl::InfiniteFuture());  // Not timed: the subscription woke the hub.
  const WatchViewer::Step step = v.Next(Idle(), At(off_tick), std::ref(version));
  ASSERT_EQ(step.kind, Kind::kSendState);
  EXPECT_EQ(v.wanted(), 7u);
  EXPECT_EQ(v.StateSent(7, std::nullopt, off_tick), 1u);
  EXPECT_EQ(v.phase(), Phase::kStreaming);
  EXPECT_EQ(v.base(), 7u);
  // The next tick a whole interval on: 37 + 100 ms rounds up to 200 ms.
  EXPECT_EQ(v.wake_at(), kStart + absl::Milliseconds(200));
}

TEST(WatchViewer, BetweenTicksNothingAndTheVersionIsNotRead) {
  Version version;
  WatchViewer v = Streaming(version);
  const int reads = version.reads;
  version.value = 2;
  EXPECT_EQ(v.Next(Idle(), At(kStart + absl::Milliseconds(50)), std::ref(version)).kind,
            Kind::kNothing);
  EXPECT_EQ(version.reads, reads);
}

TEST(WatchViewer, ATickWithoutChangeSendsNothingAndMovesToTheNextTick) {
  Version version;
  WatchViewer v = Streaming(version);
  const absl::Time tick = kStart + kInterval;
  ASSERT_EQ(v.wake_at(), tick);
  EXPECT_EQ(v.Next(Idle(), At(tick), std::ref(version)).kind, Kind::kNothing);
  EXPECT_EQ(v.wake_at(), tick + kInterval);
  // A late pass (the hub was busy) skips the missed ticks rather than replaying them.
  const absl::Time late = tick + kInterval * 3 + absl::Milliseconds(10);
  EXPECT_EQ(v.Next(Idle(), At(late), std::ref(version)).kind, Kind::kNothing);
  EXPECT_EQ(v.wake_at(), tick + kInterval * 4);
}

TEST(WatchViewer, AChangeIsSentAtTheTick) {
  Version version;
  WatchViewer v = Streaming(version);
  version.value = 5;
  const absl::Time tick = kStart + kInterval;
  ASSERT_EQ(v.Next(Idle(), At(tick), std::ref(version)).kind, Kind::kSendState);
  EXPECT_EQ(v.wanted(), 5u);
  EXPECT_EQ(v.StateSent(5, std::nullopt, tick), 2u);
  EXPECT_EQ(v.base(), 5u);
  EXPECT_EQ(v.wake_at(), tick + kInterval);
}

TEST(WatchViewer, ASlowViewerHoldsOnePendingStateAndSkipsTheSequencesItLost) {
  Version version;
  WatchViewer v = Streaming(version);
  absl::Time t = kStart;
  // Tick 1: still writing, the feed moved: one pending state, nothing coalesced yet.
  version.value = 2;
  t += kInterval;
  WatchViewer::Step step = v.Next(Writing(), At(t), std::ref(version));
  EXPECT_EQ(step.kind, Kind::kWakeOnWrite);
  EXPECT_FALSE(step.coalesced);
  EXPECT_TRUE(v.pending());
  // Ticks 2 and 3: newer states replace it, each counted.
  for (uint64_t n : {3u, 4u}) {
    version.value = n;
    t += kInterval;
    step = v.Next(Writing(), At(t), std::ref(version));
    EXPECT_EQ(step.kind, Kind::kWakeOnWrite);
    EXPECT_TRUE(step.coalesced);
  }
  // Tick 4: no newer state than the pending one: nothing replaced.
  t += kInterval;
  step = v.Next(Writing(), At(t), std::ref(version));
  EXPECT_EQ(step.kind, Kind::kWakeOnWrite);
  EXPECT_FALSE(step.coalesced);
  // The write completes between ticks: the pending state goes at once, off-tick, as the newest.
  version.value = 6;
  const absl::Time done = t + absl::Milliseconds(30);
  ASSERT_EQ(v.Next(Idle(), At(done), std::ref(version)).kind, Kind::kSendState);
  EXPECT_EQ(v.wanted(), 4u);  // At least the pending one (the hub sends its newest).
  EXPECT_EQ(v.StateSent(6, std::nullopt, done), 4u);  // 2 and 3 were skipped.
  EXPECT_FALSE(v.pending());
  EXPECT_EQ(v.wake_at(), t + kInterval * 2);  // A whole interval after `done`, on a tick.
}

TEST(WatchViewer, AWriterWithNothingNewIsLeftAlone) {
  Version version;
  WatchViewer v = Streaming(version);
  const WatchViewer::Step step = v.Next(Writing(), At(kStart + kInterval), std::ref(version));
  EXPECT_EQ(step.kind, Kind::kNothing);
  EXPECT_FALSE(v.pending());
  EXPECT_EQ(v.wake_at(), kStart + kInterval * 2);
}

TEST(WatchViewer, TheFinalStateThenSessionEndedThenClose) {
  Version version;
  WatchViewer v = Streaming(version);
  v1::SessionInfo info;
  info.set_session_id("s-1");
  version.value = 2;
  const absl::Time tick = kStart + kInterval;
  ASSERT_EQ(v.Next(Idle(), At(tick), std::ref(version)).kind, Kind::kSendState);
  EXPECT_EQ(v.StateSent(2, info, tick), 2u);
  EXPECT_EQ(v.phase(), Phase::kEnding);
  EXPECT_EQ(v.wake_at(), absl::InfiniteFuture());
  EXPECT_EQ(v.Next(Writing(), At(tick), std::ref(version)).kind, Kind::kWakeOnWrite);
  const WatchViewer::Step ended = v.Next(Idle(), At(tick), std::ref(version));
  ASSERT_EQ(ended.kind, Kind::kSendEnded);
  EXPECT_EQ(ended.sequence, 3u);
  EXPECT_EQ(v.ended().session_id(), "s-1");
  EXPECT_EQ(v.phase(), Phase::kTerminal);
  EXPECT_EQ(v.Next(Writing(), At(tick), std::ref(version)).kind, Kind::kWakeOnWrite);
  const WatchViewer::Step close = v.Next(Idle(), At(tick), std::ref(version));
  ASSERT_EQ(close.kind, Kind::kClose);
  EXPECT_TRUE(close.status.ok()) << close.status;
}

TEST(WatchViewer, ShutdownReachesEveryPhaseOnceItsWriteIsDone) {
  for (int phase = 0; phase < 3; ++phase) {
    SCOPED_TRACE(phase);
    Version version;
    WatchViewer v = phase == 0 ? WatchViewer(kInterval, kStart) : Streaming(version);
    if (phase == 2) {
      version.value = 2;
      ASSERT_EQ(v.Next(Idle(), At(kStart + kInterval), std::ref(version)).kind, Kind::kSendState);
      v.StateSent(2, v1::SessionInfo(), kStart + kInterval);  // kEnding.
    }
    const absl::Time t = kStart + kInterval * 2;
    EXPECT_EQ(v.Next(Writing(), ShuttingDownAt(t), std::ref(version)).kind, Kind::kWakeOnWrite);
    const WatchViewer::Step shutdown = v.Next(Idle(), ShuttingDownAt(t), std::ref(version));
    ASSERT_EQ(shutdown.kind, Kind::kSendShutdown);
    EXPECT_EQ(shutdown.sequence, phase == 0 ? 1u : 2u + (phase == 2));
    EXPECT_EQ(v.phase(), Phase::kTerminal);
    const WatchViewer::Step close = v.Next(Idle(), ShuttingDownAt(t), std::ref(version));
    ASSERT_EQ(close.kind, Kind::kClose);
    EXPECT_TRUE(close.status.ok());
  }
}

TEST(WatchViewer, AfterTheGracePeriodOnlyADeliveredShutdownClosesOk) {
  Version version;
  WatchViewer streaming = Streaming(version);
  WatchViewer::Step s = streaming.Next(Idle(), ForceCloseAt(kStart), std::ref(version));
  ASSERT_EQ(s.kind, Kind::kClose);
  EXPECT_EQ(s.status.code(), absl::StatusCode::kUnavailable);

  WatchViewer told = Streaming(version);
  ASSERT_EQ(told.Next(Idle(), ShuttingDownAt(kStart), std::ref(version)).kind, Kind::kSendShutdown);
  s = told.Next(Writing(), ForceCloseAt(kStart), std::ref(version));  // Not taken yet.
  ASSERT_EQ(s.kind, Kind::kClose);
  EXPECT_EQ(s.status.code(), absl::StatusCode::kUnavailable);

  WatchViewer took = Streaming(version);
  ASSERT_EQ(took.Next(Idle(), ShuttingDownAt(kStart), std::ref(version)).kind, Kind::kSendShutdown);
  s = took.Next(Idle(), ForceCloseAt(kStart), std::ref(version));
  ASSERT_EQ(s.kind, Kind::kClose);
  EXPECT_TRUE(s.status.ok());
}

TEST(WatchViewer, AFailedOrCancelledViewerClosesCancelledOnceItsWriteIsDone) {
  for (const WatchViewer::Link gone : {WatchViewer::Link{.writing = true, .failed = true},
                                       WatchViewer::Link{.writing = true, .cancelled = true}}) {
    Version version;
    WatchViewer v = Streaming(version);
    version.value = 9;  // Changes no longer matter.
    EXPECT_EQ(v.Next(gone, At(kStart + kInterval), std::ref(version)).kind, Kind::kWakeOnWrite);
    EXPECT_EQ(v.wake_at(), absl::InfiniteFuture());
    WatchViewer::Link done = gone;
    done.writing = false;
    const WatchViewer::Step s = v.Next(done, At(kStart + kInterval), std::ref(version));
    ASSERT_EQ(s.kind, Kind::kClose);
    EXPECT_EQ(s.status.code(), absl::StatusCode::kCancelled);
  }
}

TEST(WatchViewer, AStateNotReadyWaitsAsPendingWithoutSpinning) {
  Version version;
  WatchViewer v = Streaming(version);
  version.value = 3;
  const absl::Time tick = kStart + kInterval;
  ASSERT_EQ(v.Next(Idle(), At(tick), std::ref(version)).kind, Kind::kSendState);
  v.StateNotReady(tick);
  EXPECT_TRUE(v.pending());
  EXPECT_GT(v.wake_at(), tick);  // Not due again at once: the hub would spin.
  // A pass before the next tick (another viewer's): asks again, for the same version.
  version.value = 4;
  ASSERT_EQ(v.Next(Idle(), At(tick + absl::Milliseconds(10)), std::ref(version)).kind,
            Kind::kSendState);
  EXPECT_EQ(v.wanted(), 3u);
  v.StateNotReady(tick + absl::Milliseconds(10));
  EXPECT_EQ(v.wake_at(), tick + kInterval);
  // At the next tick, still not ready: the tick after.
  ASSERT_EQ(v.Next(Idle(), At(tick + kInterval), std::ref(version)).kind, Kind::kSendState);
  v.StateNotReady(tick + kInterval);
  EXPECT_EQ(v.wake_at(), tick + kInterval * 2);
  // Ready: sent, no longer pending.
  ASSERT_EQ(v.Next(Idle(), At(tick + kInterval + absl::Milliseconds(5)), std::ref(version)).kind,
            Kind::kSendState);
  EXPECT_EQ(v.StateSent(4, std::nullopt, tick + kInterval + absl::Milliseconds(5)), 2u);
  EXPECT_FALSE(v.pending());
}

TEST(WatchViewer, AFirstStateNotReadyIsAskedForAgainAtEveryPassForTheSameVersion) {
  WatchViewer v(kInterval, kStart);
  Version version{.value = 1};
  ASSERT_EQ(v.Next(Idle(), At(kStart), std::ref(version)).kind, Kind::kSendState);
  v.StateNotReady(kStart);
  EXPECT_EQ(v.phase(), Phase::kFirst);
  EXPECT_TRUE(v.pending());
  EXPECT_EQ(v.wake_at(), absl::InfiniteFuture());  // Its preparation's end wakes the hub.
  // The feed moved meanwhile: what the viewer waits for does not (the hub prepares one state at
  // a time; asking for newer at every pass would never be satisfied).
  version.value = 2;
  ASSERT_EQ(v.Next(Idle(), At(kStart + absl::Milliseconds(3)), std::ref(version)).kind,
            Kind::kSendState);
  EXPECT_EQ(v.wanted(), 1u);
  EXPECT_EQ(v.StateSent(1, std::nullopt, kStart + absl::Milliseconds(3)), 1u);
  EXPECT_FALSE(v.pending());
  EXPECT_EQ(v.phase(), Phase::kStreaming);
}

}  // namespace
}  // namespace tracetorch::daemon
