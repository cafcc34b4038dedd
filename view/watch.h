// The live view behind `tracetorch watch`: polls a TraceSource and writes a frame whenever what it
// shows changes.
//
//  - Redraw in place (a terminal): each frame clears the screen first.
//  - Append (a pipe): frames follow each other, separated by a blank line.
// Until a first version loads, the watcher shows what it waits for ("Waiting for FILE to
// appear... (Ctrl+C to exit)", as tracetorch-ml says it) or why
// the source is unusable. After that, a missing or invalid source keeps the last good frame and
// adds a one-line notice; a new good version replaces both. A version that renders exactly like the
// frame on screen is not written again.
//
// Not thread-safe: drive a Watcher from one thread. Stopping is the Waiter's job (see Run), so a
// signal handler never has to touch the watcher.
#ifndef TRACETORCH_VIEW_WATCH_H_
#define TRACETORCH_VIEW_WATCH_H_

#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "trace/record.h"
#include "view/source.h"
#include "view/text.h"

namespace tracetorch::view {

struct WatchOptions {
  std::string label = "";  // What is watched, for the header line ("train.json").
  absl::Duration interval = absl::Seconds(1);
  bool redraw_in_place = false;  // Clear the screen before each frame (a terminal).
  Style style = Style::Plain();
};

// Turns a record into the body of a frame (e.g. RenderInspect with the user's filters).
using FrameRenderer = std::function<std::string(const TraceRecord&)>;
// Waits up to `timeout`; returns false when watching should stop (SIGINT, SIGTERM, a test's limit).
using Waiter = std::function<bool(absl::Duration timeout)>;
using Clock = std::function<absl::Time()>;

class Watcher {
 public:
  // `source` and `out` must outlive the watcher.
  Watcher(
      TraceSource* source, FrameRenderer render, WatchOptions options, std::ostream* out,
      Clock clock = [] { return absl::Now(); });

  // Polls the source once and writes whatever changed, then flushes.
  void Tick();

  // Tick(), then wait(interval), repeatedly, until `wait` returns false (then it writes "Stopped
  // watching.") or writing to `out` fails (a closed pipe).
  void Run(const Waiter& wait);

  // Frames written so far, counting notices and waiting messages.
  int writes() const { return writes_; }

 private:
  void WriteFrame();
  void WriteNotice();
  void Emit(const std::string& text);
  std::string Header() const;

  TraceSource* const source_;
  const FrameRenderer render_;
  const WatchOptions options_;
  std::ostream* const out_;
  const Clock clock_;

  std::optional<std::string> body_;  // The last good frame body.
  absl::Time updated_at_;            // When body_ was rendered.
  std::string notice_;               // The message on screen about the source; empty if none.
  int writes_ = 0;
};

}  // namespace tracetorch::view

#endif  // TRACETORCH_VIEW_WATCH_H_
