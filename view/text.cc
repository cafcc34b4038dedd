#include "view/text.h"

#include <algorithm>
#include <string>
#include <string_view>

namespace tracetorch::view {
namespace {

constexpr std::string_view kReset = "\x1b[0m";

std::string_view ColorCode(Color color) {
  switch (color) {
    case Color::kRed:
      return "\x1b[31m";
    case Color::kYellow:
      return "\x1b[33m";
    case Color::kGreen:
      return "\x1b[32m";
    case Color::kBlue:
      return "\x1b[34m";
    case Color::kCyan:
      return "\x1b[36m";
    case Color::kDim:
      return "\x1b[2m";
    case Color::kBold:
      return "\x1b[1m";
  }
  return "";
}

// What a terminal makes of the bytes at text[i]: an escape sequence takes no column; one code point
// (a lead byte and its continuation bytes) or one invalid byte takes one.
struct TextUnit {
  size_t bytes;
  size_t columns;
};

TextUnit NextTextUnit(std::string_view text, size_t i) {
  const unsigned char c = static_cast<unsigned char>(text[i]);
  size_t j = i + 1;
  if (c == 0x1b) {
    if (j < text.size() && text[j] == '[') {
      // CSI: parameters and intermediates, then one final byte in 0x40..0x7e.
      ++j;
      while (j < text.size() && !(text[j] >= 0x40 && text[j] <= 0x7e)) ++j;
      if (j < text.size()) ++j;
    }
    return {j - i, 0};
  }
  size_t length = 1;  // What the lead byte announces.
  if (c >= 0xf0 && c < 0xf8) {
    length = 4;
  } else if (c >= 0xe0 && c < 0xf0) {
    length = 3;
  } else if (c >= 0xc0 && c < 0xe0) {
    length = 2;
  }
  while (j < text.size() && j - i < length &&
         (static_cast<unsigned char>(text[j]) & 0xc0) == 0x80) {
    ++j;
  }
  return {j - i, 1};
}

std::string Repeat(std::string_view unit, size_t count) {
  std::string out;
  out.reserve(unit.size() * count);
  for (size_t i = 0; i < count; ++i) out.append(unit);
  return out;
}

// The glyphs a border is drawn with.
struct Border {
  std::string_view horizontal, vertical;
  std::string_view top_left, top_mid, top_right;
  std::string_view mid_left, mid_mid, mid_right;
  std::string_view bottom_left, bottom_mid, bottom_right;
};

constexpr Border kAsciiBorder = {"-", "|", "+", "+", "+", "+", "+", "+", "+", "+", "+"};
constexpr Border kBoxBorder = {"─", "│", "┌", "┬", "┐", "├", "┼", "┤", "└", "┴", "┘"};
constexpr Border kRoundBorder = {"─", "│", "╭", "┬", "╮", "├", "┼", "┤", "╰", "┴", "╯"};

}  // namespace

std::string Paint(std::string_view text, Color color, const Style& style) {
  if (!style.color || text.empty()) return std::string(text);
  std::string out(ColorCode(color));
  out.append(text);
  out.append(kReset);
  return out;
}

size_t DisplayWidth(std::string_view text) {
  size_t width = 0;
  for (size_t i = 0; i < text.size();) {
    const TextUnit unit = NextTextUnit(text, i);
    width += unit.columns;
    i += unit.bytes;
  }
  return width;
}

std::string TruncateLine(std::string_view line, size_t width, const Style& style) {
  if (width == 0 || DisplayWidth(line) <= width) return std::string(line);
  std::string out;
  size_t columns = 0;
  for (size_t i = 0; i < line.size();) {
    const TextUnit unit = NextTextUnit(line, i);
    if (unit.columns > 0 && columns + unit.columns >= width) break;  // The last one: the ellipsis.
    out.append(line.substr(i, unit.bytes));
    columns += unit.columns;
    i += unit.bytes;
  }
  out.append(Glyph(style, "…", ">"));
  if (style.color) out.append(kReset);
  return out;
}

std::string TruncateLines(std::string_view text, size_t width, const Style& style) {
  if (width == 0) return std::string(text);
  std::string out;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find('\n', begin);
    out.append(TruncateLine(text.substr(begin, end - begin), width, style));
    if (end == std::string_view::npos) break;
    out.push_back('\n');
    begin = end + 1;
  }
  return out;
}

std::string PadRight(std::string_view text, size_t width) {
  std::string out(text);
  const size_t have = DisplayWidth(text);
  if (have < width) out.append(width - have, ' ');
  return out;
}

std::string Sanitize(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

std::string RenderTable(const Table& table, const Style& style) {
  const Border& b = style.unicode ? kBoxBorder : kAsciiBorder;
  const size_t columns = table.header.size();
  std::vector<size_t> widths(columns, 0);
  for (size_t c = 0; c < columns; ++c) widths[c] = DisplayWidth(table.header[c]);
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < columns && c < row.size(); ++c) {
      widths[c] = std::max(widths[c], DisplayWidth(row[c]));
    }
  }

  auto rule = [&](std::string_view left, std::string_view mid, std::string_view right) {
    std::string line(left);
    for (size_t c = 0; c < columns; ++c) {
      if (c > 0) line.append(mid);
      line.append(Repeat(b.horizontal, widths[c] + 2));
    }
    line.append(right);
    line.push_back('\n');
    return line;
  };
  auto cells = [&](const std::vector<std::string>& row, bool header) {
    std::string line(b.vertical);
    for (size_t c = 0; c < columns; ++c) {
      const std::string_view cell = c < row.size() ? std::string_view(row[c]) : std::string_view();
      line.push_back(' ');
      line.append(header ? Paint(PadRight(cell, widths[c]), Color::kBold, style)
                         : PadRight(cell, widths[c]));
      line.push_back(' ');
      line.append(b.vertical);
    }
    line.push_back('\n');
    return line;
  };

  std::string out;
  if (!table.title.empty()) {
    out.append(Paint(table.title, Color::kBold, style));
    out.push_back('\n');
  }
  out.append(rule(b.top_left, b.top_mid, b.top_right));
  out.append(cells(table.header, /*header=*/true));
  out.append(rule(b.mid_left, b.mid_mid, b.mid_right));
  for (const auto& row : table.rows) out.append(cells(row, /*header=*/false));
  out.append(rule(b.bottom_left, b.bottom_mid, b.bottom_right));
  return out;
}

std::string RenderPanel(const Panel& panel, const Style& style) {
  const Border& b = style.unicode ? kRoundBorder : kAsciiBorder;
  size_t key_width = 0;
  size_t value_width = 0;
  for (const auto& [key, value] : panel.rows) {
    key_width = std::max(key_width, DisplayWidth(key));
    value_width = std::max(value_width, DisplayWidth(value));
  }
  constexpr size_t kMargin = 2;  // Spaces inside the border on each side.
  constexpr size_t kGap = 4;     // Spaces between key and value columns.
  const size_t title_width = panel.title.empty() ? 0 : DisplayWidth(panel.title) + 2;
  size_t inner = kMargin + key_width + kGap + value_width + kMargin;
  if (inner < title_width + 4) {
    value_width += title_width + 4 - inner;
    inner = title_width + 4;
  }

  std::string out(b.top_left);
  if (title_width == 0) {
    out.append(Repeat(b.horizontal, inner));
  } else {
    const size_t left = (inner - title_width) / 2;
    out.append(Repeat(b.horizontal, left));
    out.push_back(' ');
    out.append(Paint(panel.title, Color::kBold, style));
    out.push_back(' ');
    out.append(Repeat(b.horizontal, inner - title_width - left));
  }
  out.append(b.top_right);
  out.push_back('\n');
  for (const auto& [key, value] : panel.rows) {
    out.append(b.vertical);
    out.append(kMargin, ' ');
    out.append(Paint(PadRight(key, key_width), Color::kCyan, style));
    out.append(kGap, ' ');
    out.append(PadRight(value, value_width));
    out.append(kMargin, ' ');
    out.append(b.vertical);
    out.push_back('\n');
  }
  out.append(b.bottom_left);
  out.append(Repeat(b.horizontal, inner));
  out.append(b.bottom_right);
  out.push_back('\n');
  return out;
}

}  // namespace tracetorch::view
