#include "view/watch.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "view/terminal.h"

namespace tracetorch::view {
namespace {

// A file watch redraws the whole screen: home, then clear it.
std::string HomeAndClear() { return absl::StrCat(kCursorHome, kClearScreen); }

}  // namespace

Watcher::Watcher(TraceSource* source, FrameRenderer render, WatchOptions options, std::ostream* out,
                 Clock clock)
    : source_(source),
      render_(std::move(render)),
      options_(std::move(options)),
      out_(out),
      clock_(std::move(clock)) {}

void Watcher::Tick() {
  SourcePoll poll = source_->Poll();
  switch (poll.state) {
    case SourcePoll::State::kUnchanged:
      return;
    case SourcePoll::State::kUpdated: {
      std::string body = render_(poll.record);
      if (body_.has_value() && *body_ == body && notice_.empty()) return;
      body_ = std::move(body);
      updated_at_ = clock_();
      notice_.clear();
      WriteFrame();
      return;
    }
    case SourcePoll::State::kMissing:
    case SourcePoll::State::kInvalid:
      if (poll.message == notice_) return;
      notice_ = std::move(poll.message);
      WriteNotice();
      return;
  }
}

void Watcher::Run(const Waiter& wait) {
  while (true) {
    Tick();
    if (out_->fail()) return;
    if (!wait(options_.interval)) break;
  }
  // As tracetorch-ml says it when Ctrl+C ends a watch.
  *out_ << "\n" << Paint("Stopped watching.", Color::kDim, options_.style) << "\n";
  out_->flush();
}

std::string Watcher::Header() const {
  const std::string dot(Glyph(options_.style, " · ", " - "));
  return Paint(
      absl::StrCat("Watching ", Sanitize(options_.label), dot, "updated ",
                   absl::FormatTime("%H:%M:%S", updated_at_, absl::LocalTimeZone()), dot, "every ",
                   absl::FormatDuration(options_.interval), dot, "Ctrl+C to quit"),
      Color::kDim, options_.style);
}

void Watcher::WriteFrame() {
  std::string text;
  if (options_.redraw_in_place) text.append(HomeAndClear());
  absl::StrAppend(&text, Header(), "\n\n", *body_);
  Emit(text);
}

void Watcher::WriteNotice() {
  const Style& style = options_.style;
  if (!body_.has_value()) {
    // Nothing good to show yet: the notice is the whole frame.
    std::string text;
    if (options_.redraw_in_place) text.append(HomeAndClear());
    absl::StrAppend(&text, Sanitize(notice_), "\n");
    Emit(text);
    return;
  }
  const std::string line =
      absl::StrCat(Paint(Glyph(style, "⚠ ", "notice: "), Color::kYellow, style), Sanitize(notice_),
                   " (showing the last good version)\n");
  if (options_.redraw_in_place) {
    Emit(absl::StrCat(HomeAndClear(), Header(), "\n\n", *body_, "\n", line));
  } else {
    Emit(line);
  }
}

void Watcher::Emit(const std::string& text) {
  // Appended output separates entries with a blank line; a redraw replaces the screen.
  if (!options_.redraw_in_place && writes_ > 0) *out_ << '\n';
  *out_ << text;
  out_->flush();
  ++writes_;
}

}  // namespace tracetorch::view
