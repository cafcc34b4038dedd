#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "flight/reader.h"
#include "flight/recorder.h"
#include "gtest/gtest.h"

namespace tracetorch::flight {
namespace {

std::unique_ptr<Recorder> MakeRecorder() {
  absl::StatusOr<std::unique_ptr<Recorder>> r = Recorder::Create();
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

TEST(FlightRecorder, IsASealedMemfdOfTheStatedSize) {
  std::unique_ptr<Recorder> r = MakeRecorder();
  ASSERT_GE(r->fd(), 0);
  EXPECT_EQ(r->size(), kRegionBytes);
  EXPECT_EQ(lseek(r->fd(), 0, SEEK_END), static_cast<off_t>(kRegionBytes));
  const int seals = fcntl(r->fd(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW), F_SEAL_SHRINK | F_SEAL_GROW);
  EXPECT_NE(ftruncate(r->fd(), 4096), 0);  // Sealed: nobody can cut a reader's mapping short.
}

TEST(FlightRecorder, FreshRegionIsIdle) {
  std::unique_ptr<Recorder> r = MakeRecorder();
  absl::StatusOr<PositionView> p = ReadPosition(r->data(), r->size());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->recording);
  EXPECT_EQ(p->phase, Phase::kIdle);
  EXPECT_EQ(p->layer, -1);
  EXPECT_EQ(p->pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(p->events, 0u);
}

TEST(FlightRecorder, PositionSpansAndNamesRoundTrip) {
  std::unique_ptr<Recorder> r = MakeRecorder();
  r->AddName(0, "encoder");
  r->AddName(1, "encoder.layers.5.attn");
  r->SetRecording(true, 100);
  r->BeginStep(0, 1000);
  r->Move(Phase::kForward, Event::kEnter, -1, 0, 1000);
  r->Move(Phase::kForward, Event::kEnter, 1, 0, 1100);
  r->Span(SpanKind::kForward, 1, 0, 1100, 250, 0);
  r->Move(Phase::kBackward, Event::kEnter, 1, 0, 2000);
  r->Span(SpanKind::kBackward, 1, 0, 2000, 400, kSpanNonFinite);
  r->Move(Phase::kBackward, Event::kExit, 1, 0, 2400);

  absl::StatusOr<RegionView> v = ReadRegion(r->data(), r->size());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->position.recording);
  EXPECT_EQ(v->position.phase, Phase::kBackward);
  EXPECT_EQ(v->position.event, Event::kExit);
  EXPECT_EQ(v->position.layer, 1);
  EXPECT_EQ(v->position.since_ns, 2400);
  EXPECT_EQ(v->position.events, 5u);
  EXPECT_EQ(v->position.tid, static_cast<uint32_t>(gettid()));
  ASSERT_EQ(v->spans.size(), 2u);
  EXPECT_EQ(v->spans[0].kind, SpanKind::kForward);
  EXPECT_EQ(v->spans[0].start_ns, 1100);
  EXPECT_EQ(v->spans[0].duration_ns, 250);
  EXPECT_EQ(v->spans[1].kind, SpanKind::kBackward);
  EXPECT_EQ(v->spans[1].flags, kSpanNonFinite);
  EXPECT_EQ(v->names.at(1), "encoder.layers.5.attn");
  EXPECT_EQ(Describe(v->position, v->names), "step 0, backward, after encoder.layers.5.attn");
  r->Move(Phase::kForward, Event::kEnter, -1, 3, 5000);
  absl::StatusOr<PositionView> p = ReadPosition(r->data(), r->size());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Describe(*p, v->names), "step 3, forward, in the model's own code");
  r->SetRecording(false, 6000);
  p = ReadPosition(r->data(), r->size());
  EXPECT_EQ(Describe(*p, v->names), "step 3, idle");
}

TEST(FlightRecorder, RingKeepsTheLatestSpansOldestFirst) {
  std::unique_ptr<Recorder> r = MakeRecorder();
  const uint64_t total = kRingCapacity + 1000;
  for (uint64_t i = 0; i < total; ++i) {
    r->Span(SpanKind::kForward, static_cast<int32_t>(i % 7), i, static_cast<int64_t>(i), 1, 0);
  }
  absl::StatusOr<RegionView> v = ReadRegion(r->data(), r->size());
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->spans_written, total);
  ASSERT_EQ(v->spans.size(), kRingCapacity);
  EXPECT_EQ(v->spans.front().step, 1000u);
  EXPECT_EQ(v->spans.back().step, total - 1);
  EXPECT_EQ(v->torn_spans, 0u);
}

TEST(FlightRecorder, MedianStepTimeAndStallThreshold) {
  std::unique_ptr<Recorder> r = MakeRecorder();
  PositionView p;
  EXPECT_FALSE(MedianStepTime(p).has_value());
  // Steps 0..99, 10 ms apart except one slow step: the median ignores it.
  int64_t t = 1'000'000;
  for (uint64_t s = 0; s < 100; ++s) {
    r->BeginStep(s, t);
    t += s == 90 ? 5'000'000'000 : 10'000'000;
  }
  absl::StatusOr<PositionView> read = ReadPosition(r->data(), r->size());
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->steps.size(), kStepSlots);
  EXPECT_EQ(read->steps.back(), 99u);
  ASSERT_TRUE(MedianStepTime(*read).has_value());
  EXPECT_EQ(*MedianStepTime(*read), absl::Milliseconds(10));
  StallRule rule{.factor = 10, .floor = absl::Milliseconds(50)};
  EXPECT_EQ(StallThreshold(rule, MedianStepTime(*read)), absl::Milliseconds(100));
  rule.floor = absl::Seconds(60);
  EXPECT_EQ(StallThreshold(rule, MedianStepTime(*read)), absl::Seconds(60));
  EXPECT_EQ(StallThreshold(rule, std::nullopt), absl::Seconds(60));
}

// A reader never sees a position mixed from two writes, nor a span mixed from two laps.
TEST(FlightRecorder, ConcurrentReaderSeesNoTornPosition) {
  std::unique_ptr<Recorder> r = MakeRecorder();
  std::atomic<bool> stop{false};
  std::atomic<bool> started{false};
  std::thread writer([&] {
    for (uint64_t k = 1; !stop.load(std::memory_order_relaxed); ++k) {
      if (k == 2) started.store(true);
      r->Move(Phase::kForward, Event::kEnter, static_cast<int32_t>(k % 1000), k,
              static_cast<int64_t>(k) * 3);
      r->Span(SpanKind::kForward, static_cast<int32_t>(k % 1000), k, static_cast<int64_t>(k) * 5,
              static_cast<int64_t>(k) * 7, 0);
    }
  });
  while (!started.load()) std::this_thread::yield();
  int checked = 0;
  uint64_t torn = 0;
  for (int i = 0; i < 100000 && checked < 200; ++i) {
    absl::StatusOr<RegionView> v = ReadRegion(r->data(), r->size());
    if (!v.ok()) {
      EXPECT_EQ(v.status().code(), absl::StatusCode::kUnavailable);
      continue;
    }
    const PositionView& p = v->position;
    if (p.events > 0) {
      EXPECT_EQ(p.layer, static_cast<int32_t>(p.step % 1000));
      EXPECT_EQ(p.since_ns, static_cast<int64_t>(p.step) * 3);
      EXPECT_EQ(p.events, p.step);
      ++checked;
    }
    for (const SpanView& s : v->spans) {
      ASSERT_EQ(s.start_ns, static_cast<int64_t>(s.step) * 5);
      ASSERT_EQ(s.duration_ns, static_cast<int64_t>(s.step) * 7);
      ASSERT_EQ(s.layer, static_cast<int32_t>(s.step % 1000));
    }
    torn += v->torn_spans;
  }
  stop = true;
  writer.join();
  EXPECT_EQ(checked, 200);
  (void)torn;  // Counted, never mixed: the asserts above are the point.
}

// The daemon's case: it holds its own descriptor and mapping; the writer is gone.
TEST(FlightRecorder, ReadableThroughAnotherMappingAfterTheWriterIsGone) {
  std::unique_ptr<Recorder> r = MakeRecorder();
  r->AddName(4, "fc");
  r->SetRecording(true, 1);
  r->Move(Phase::kForward, Event::kEnter, 4, 7, 42);
  const int fd = dup(r->fd());
  ASSERT_GE(fd, 0);
  r.reset();
  void* base = mmap(nullptr, kRegionBytes, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(base, MAP_FAILED);
  absl::StatusOr<RegionView> v = ReadRegion(base, kRegionBytes);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Describe(v->position, v->names), "step 7, forward, in fc");
  munmap(base, kRegionBytes);
  close(fd);
}

TEST(FlightReader, RefusesWhatIsNotARegion) {
  std::vector<char> junk(kRegionBytes, 'x');
  EXPECT_EQ(ReadRegion(junk.data(), junk.size()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadRegion(junk.data(), 100).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadRegion(nullptr, 0).status().code(), absl::StatusCode::kInvalidArgument);

  std::unique_ptr<Recorder> r = MakeRecorder();
  std::vector<char> copy(static_cast<const char*>(r->data()),
                         static_cast<const char*>(r->data()) + r->size());
  auto* h = reinterpret_cast<Header*>(copy.data());
  h->ring_capacity = 1u << 30;  // Hostile geometry.
  EXPECT_EQ(ReadRegion(copy.data(), copy.size()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FlightReader, HostileNamesAndRingStayInBounds) {
  std::unique_ptr<Recorder> r = MakeRecorder();
  r->AddName(1, "ok");
  std::vector<char> copy(static_cast<const char*>(r->data()),
                         static_cast<const char*>(r->data()) + r->size());
  auto* h = reinterpret_cast<Header*>(copy.data());
  h->names_end = ~0ull;  // Clamped to the table.
  char* names = copy.data() + kNamesOffset;
  const uint16_t huge = 0xffff;
  std::memcpy(names + kNameRecordHeader + 2 + 4, &huge, sizeof(huge));  // A record past the end.
  h->ring_head = ~0ull - 5;  // Spans whose sequence numbers do not match: dropped.
  absl::StatusOr<RegionView> v = ReadRegion(copy.data(), copy.size());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->names.at(1), "ok");
  EXPECT_TRUE(v->spans.empty());
  EXPECT_EQ(v->torn_spans, kRingCapacity);
}

TEST(FlightRecorder, FullNameTableCountsWhatDidNotFit) {
  std::unique_ptr<Recorder> r = MakeRecorder();
  const std::string name(1000, 'n');
  int32_t id = 0;
  for (; id < 200; ++id) r->AddName(id, name);
  absl::StatusOr<RegionView> v = ReadRegion(r->data(), r->size());
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->names.size() + v->names_dropped, 200u);
  EXPECT_GT(v->names_dropped, 0u);
  EXPECT_EQ(v->names.size(), kNameBytes / (kNameRecordHeader + 1000));
}

}  // namespace
}  // namespace tracetorch::flight
