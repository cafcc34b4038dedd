// Terminal handling for the live views (`watch FILE`, `watch --remote`, `watch --job`): the
// terminal's size, drawing a frame over the previous one, and the signals that end a watch.
//
// Thread-compatible, except MakeSignalWaiter (see there).
#ifndef TRACETORCH_VIEW_TERMINAL_H_
#define TRACETORCH_VIEW_TERMINAL_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "view/text.h"
#include "view/watch.h"

namespace tracetorch::view {

// Cursor home; clear the whole screen; clear to the end of the line; clear to the end of the
// screen.
inline constexpr char kCursorHome[] = "\x1b[H";
inline constexpr char kClearScreen[] = "\x1b[2J";
inline constexpr char kClearToLineEnd[] = "\x1b[K";
inline constexpr char kClearBelow[] = "\x1b[J";

// Terminal size in columns and rows; 0 when unknown.
struct TerminalSize {
  size_t columns = 0;
  size_t rows = 0;
};

// The size of the terminal on `fd` (TIOCGWINSZ); zeros when `fd` is not a terminal.
TerminalSize QueryTerminalSize(int fd);

// Cuts `frame` (lines ending in '\n') to `rows` - 1 rows, so that the cursor never scrolls the
// screen: the last kept row says how many lines were left out ("… 16 more lines (narrow the view
// with --filter or --type)", dim, cut to `columns`). Unchanged when it fits or `rows` < 3
// (unknown, or too small to say anything).
std::string FitRows(std::string_view frame, size_t rows, size_t columns, const Style& style);

// Draws frames over each other on a terminal, without flicker or scrolling: the cursor goes home,
// every line is followed by a clear to its end, then the rest of the screen is cleared. Only the
// first frame clears the whole screen first. Example (a 2-line frame after the first one):
//   "\x1b[H" "line 1" "\x1b[K" "\n" "line 2" "\x1b[K" "\x1b[J"
// The cursor stays at the end of the frame's last line.
class InPlaceScreen {
 public:
  // The bytes that replace what is on screen with `frame`, cut to `size` (FitRows; lines are
  // expected to be cut to size.columns already).
  std::string Draw(std::string_view frame, TerminalSize size, const Style& style);

  // What leaves the cursor below the last frame, so that what follows (a shell prompt) starts on
  // a line of its own: "\n" once a frame was drawn, else "".
  std::string Leave() const { return drawn_ ? "\n" : ""; }

 private:
  bool drawn_ = false;
};

// Blocks SIGINT and SIGTERM in the calling thread and returns a Waiter that sleeps in
// sigtimedwait(2): it returns false as soon as either signal is pending or arrives (no handler
// runs; the watch ends with exit code 0), true when the timeout passed. Threads started after
// this call inherit the blocked mask, so call it before starting any (the gRPC client's).
// The Waiter must be called from the thread that made it.
Waiter MakeSignalWaiter();

}  // namespace tracetorch::view

#endif  // TRACETORCH_VIEW_TERMINAL_H_
