// Terminal text primitives for the `tracetorch` command: styles, display width, bordered tables and
// panels. Everything returns strings; nothing here writes to a stream.
//
// Two output modes:
//  - rich  (Style::Rich): ANSI colours, Unicode box drawing and symbols (✓ ⚠ ✗). For a terminal.
//  - plain (Style::Plain): ASCII only (`|`, `+--`, `\--`), no escape codes. For pipes, files,
//  NO_COLOR.
// Widths are measured in display columns: each UTF-8 code point (and each byte that is not valid
// UTF-8) counts as one column and an escape sequence (ESC, or a CSI sequence "ESC [ ... final
// byte") as zero, so a cell holding "⚠ warning" is 9 columns wide. DisplayWidth, PadRight and
// TruncateLine share the one reading of escape sequences.
//
// Thread-compatible; no shared state.
#ifndef TRACETORCH_VIEW_TEXT_H_
#define TRACETORCH_VIEW_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tracetorch::view {

struct Style {
  bool color = false;    // ANSI SGR escape codes.
  bool unicode = false;  // Box drawing and symbols; ASCII when false.

  static Style Plain() { return Style{}; }
  static Style Rich() { return Style{.color = true, .unicode = true}; }
};

enum class Color { kRed, kYellow, kGreen, kBlue, kCyan, kDim, kBold };

// Wraps `text` in the escape sequence for `color` (and a reset) when style.color; otherwise returns
// `text` unchanged.
std::string Paint(std::string_view text, Color color, const Style& style);

// Picks the rich or the plain spelling of a symbol or glyph.
inline std::string_view Glyph(const Style& style, std::string_view rich, std::string_view plain) {
  return style.unicode ? rich : plain;
}
// Glyph() as a std::string, for absl::StrCat (which takes absl::string_view, not
// std::string_view, in Debian's Abseil).
inline std::string GlyphString(const Style& style, std::string_view rich, std::string_view plain) {
  return std::string(Glyph(style, rich, plain));
}

// Display columns of `text` (see the file comment).
size_t DisplayWidth(std::string_view text);

// Cuts `line` (one line, no newline; may hold escape codes, which are kept) to `width` display
// columns, the last one an ellipsis ("…", or ">" in ASCII) when something was cut; a colour reset
// follows a cut in colour style. Unchanged when it fits or `width` is 0.
std::string TruncateLine(std::string_view line, size_t width, const Style& style);
// TruncateLine on every line of `text`.
std::string TruncateLines(std::string_view text, size_t width, const Style& style);

// `text` followed by spaces up to `width` display columns (unchanged if already that wide).
std::string PadRight(std::string_view text, size_t width);

// Makes text read from a trace file safe to print: control characters (including ESC, CR, LF and
// TAB) become '?', so a crafted model or layer name cannot move the cursor or recolour the
// terminal.
std::string Sanitize(std::string_view text);

// A bordered table with an optional title line above it. Cells may hold escape codes (from Paint);
// every row should have header.size() cells (missing cells render empty, extra cells are dropped).
struct Table {
  std::string title = "";
  std::vector<std::string> header = {};
  std::vector<std::vector<std::string>> rows = {};
};
// Ends with a newline. Example (plain):
//   Warnings & Anomalies
//   +----------+-------+---------+
//   | Severity | Layer | Message |
//   +----------+-------+---------+
//   | warning  | norm  | ...     |
//   +----------+-------+---------+
std::string RenderTable(const Table& table, const Style& style);

// A bordered box of key/value rows with the title in its top border. Ends with a newline.
// Example (plain):
//   +-- Model Summary ----------+
//   |  Model           TrainNet |
//   +---------------------------+
struct Panel {
  std::string title = "";
  std::vector<std::pair<std::string, std::string>> rows = {};
};
std::string RenderPanel(const Panel& panel, const Style& style);

}  // namespace tracetorch::view

#endif  // TRACETORCH_VIEW_TEXT_H_
