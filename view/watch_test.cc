#include "view/watch.h"

#include <deque>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch::view {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Returns scripted polls, then kUnchanged forever.
class FakeSource : public TraceSource {
 public:
  void Push(SourcePoll poll) { polls_.push_back(std::move(poll)); }
  void PushRecord(const std::string& model) {
    SourcePoll poll;
    poll.state = SourcePoll::State::kUpdated;
    poll.record.metadata.model_name = model;
    Push(std::move(poll));
  }
  void PushState(SourcePoll::State state, std::string message) {
    SourcePoll poll;
    poll.state = state;
    poll.message = std::move(message);
    Push(std::move(poll));
  }
  SourcePoll Poll() override {
    if (polls_.empty()) return SourcePoll{};
    SourcePoll poll = std::move(polls_.front());
    polls_.pop_front();
    return poll;
  }

 private:
  std::deque<SourcePoll> polls_;
};

std::string Render(const TraceRecord& record) {
  return absl::StrCat("model=", record.metadata.model_name, "\n");
}

WatchOptions Options(bool redraw) {
  return WatchOptions{.label = "t.json",
                      .interval = absl::Milliseconds(100),
                      .redraw_in_place = redraw,
                      .style = Style::Plain()};
}

absl::Time FixedClock() { return absl::FromUnixSeconds(0); }

TEST(Watcher, PipedFramesAreAppendedWithBlankLines) {
  FakeSource source;
  std::ostringstream out;
  Watcher watcher(&source, Render, Options(false), &out, FixedClock);
  source.PushState(SourcePoll::State::kMissing, "waiting for t.json...");
  source.PushState(SourcePoll::State::kMissing, "waiting for t.json...");  // Not repeated.
  source.PushRecord("A");
  source.PushRecord("B");
  for (int i = 0; i < 5; ++i) watcher.Tick();
  const std::string text = out.str();
  EXPECT_THAT(text, testing::StartsWith("waiting for t.json...\n\nWatching t.json - updated "));
  EXPECT_THAT(text, HasSubstr(" - every 100ms - Ctrl+C to quit\n\nmodel=A\n\nWatching t.json"));
  EXPECT_THAT(text, testing::EndsWith("\n\nmodel=B\n"));
  EXPECT_THAT(text, Not(HasSubstr("\x1b")));
  EXPECT_EQ(watcher.writes(), 3);
}

TEST(Watcher, InvalidVersionKeepsLastFrameAndShowsOneNotice) {
  FakeSource source;
  std::ostringstream out;
  Watcher watcher(&source, Render, Options(false), &out, FixedClock);
  source.PushRecord("A");
  source.PushState(SourcePoll::State::kInvalid, "t.json: line 1, column 13: unexpected end");
  source.PushState(SourcePoll::State::kInvalid, "t.json: line 1, column 13: unexpected end");
  source.PushRecord("A");  // Back to the same content: shown again, the notice is gone.
  for (int i = 0; i < 4; ++i) watcher.Tick();
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("model=A\n\nnotice: t.json: line 1, column 13: unexpected end "
                              "(showing the last good version)\n\nWatching t.json"));
  EXPECT_EQ(watcher.writes(), 3);
}

TEST(Watcher, IdenticalRenderIsNotWrittenTwice) {
  FakeSource source;
  std::ostringstream out;
  Watcher watcher(&source, Render, Options(false), &out, FixedClock);
  source.PushRecord("A");
  source.PushRecord("A");
  watcher.Tick();
  watcher.Tick();
  EXPECT_EQ(watcher.writes(), 1);
}

TEST(Watcher, RedrawInPlaceClearsAndRepaintsLastFrameWithNotice) {
  FakeSource source;
  std::ostringstream out;
  Watcher watcher(&source, Render, Options(true), &out, FixedClock);
  source.PushRecord("A");
  watcher.Tick();
  EXPECT_THAT(out.str(), testing::StartsWith("\x1b[H\x1b[2JWatching t.json"));
  out.str("");
  source.PushState(SourcePoll::State::kMissing, "waiting for t.json...");
  watcher.Tick();
  const std::string text = out.str();
  EXPECT_THAT(text, testing::StartsWith("\x1b[H\x1b[2JWatching t.json"));
  EXPECT_THAT(text, HasSubstr("model=A\n\nnotice: waiting for t.json... (showing the last good "
                              "version)\n"));
}

TEST(Watcher, RunStopsWhenTheWaiterSaysSo) {
  FakeSource source;
  std::ostringstream out;
  Watcher watcher(&source, Render, Options(false), &out, FixedClock);
  source.PushRecord("A");
  source.PushRecord("B");
  source.PushRecord("C");
  int waits = 0;
  watcher.Run([&](absl::Duration timeout) {
    EXPECT_EQ(timeout, absl::Milliseconds(100));
    return ++waits < 2;
  });
  EXPECT_EQ(waits, 2);
  EXPECT_THAT(out.str(), HasSubstr("model=B"));
  EXPECT_THAT(out.str(), Not(HasSubstr("model=C")));
  // tracetorch-ml's last words, once, at the end.
  EXPECT_THAT(out.str(), testing::EndsWith("model=B\n\nStopped watching.\n"));
}

TEST(Watcher, RunStopsWhenOutputFails) {
  FakeSource source;
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  Watcher watcher(&source, Render, Options(false), &out, FixedClock);
  source.PushRecord("A");
  int waits = 0;
  watcher.Run([&](absl::Duration) { return ++waits < 100; });
  EXPECT_EQ(waits, 0);
}

}  // namespace
}  // namespace tracetorch::view
