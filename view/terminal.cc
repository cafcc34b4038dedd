#include "view/terminal.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tracetorch::view {

TerminalSize QueryTerminalSize(int fd) {
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) != 0) return TerminalSize{};
  return TerminalSize{.columns = ws.ws_col, .rows = ws.ws_row};
}

std::string FitRows(std::string_view frame, size_t rows, size_t columns, const Style& style) {
  if (rows < 3) return std::string(frame);
  std::vector<size_t> starts = {0};
  for (size_t i = 0; i + 1 < frame.size(); ++i) {
    if (frame[i] == '\n') starts.push_back(i + 1);
  }
  if (starts.size() <= rows - 1) return std::string(frame);
  const size_t keep = rows - 2;
  std::string out(frame.substr(0, starts[keep]));
  const std::string more =
      Paint(absl::StrCat(std::string(Glyph(style, "… ", "... ")), starts.size() - keep,
                         " more lines (narrow the view with --filter or --type)"),
            Color::kDim, style);
  absl::StrAppend(&out, TruncateLine(more, columns, style), "\n");
  return out;
}

std::string InPlaceScreen::Draw(std::string_view frame, TerminalSize size, const Style& style) {
  std::string fitted = FitRows(frame, size.rows, size.columns, style);
  if (!fitted.empty() && fitted.back() == '\n') fitted.pop_back();  // The cursor stays on it.
  std::string text = drawn_ ? std::string(kCursorHome) : absl::StrCat(kCursorHome, kClearScreen);
  drawn_ = true;
  size_t begin = 0;
  while (begin < fitted.size()) {
    size_t end = fitted.find('\n', begin);
    if (end == std::string::npos) end = fitted.size();
    absl::StrAppend(&text, absl::string_view(fitted).substr(begin, end - begin), kClearToLineEnd);
    if (end < fitted.size()) text.push_back('\n');
    begin = end + 1;
  }
  text.append(kClearBelow);
  return text;
}

Waiter MakeSignalWaiter() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return [signals](absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
      const timespec ts = absl::ToTimespec(left);
      const int sig = sigtimedwait(&signals, nullptr, &ts);
      if (sig == SIGINT || sig == SIGTERM) return false;
      if (sig < 0 && errno == EINTR) continue;  // Another signal; keep waiting.
      return true;                              // EAGAIN: the interval passed.
    }
  };
}

}  // namespace tracetorch::view
