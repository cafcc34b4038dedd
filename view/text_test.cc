#include "view/text.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch::view {
namespace {

using ::testing::StartsWith;

TEST(DisplayWidth, CountsCodePointsAndSkipsEscapes) {
  EXPECT_EQ(DisplayWidth(""), 0u);
  EXPECT_EQ(DisplayWidth("abc"), 3u);
  EXPECT_EQ(DisplayWidth("│ ├── ✓"), 7u);
  EXPECT_EQ(DisplayWidth("⚠ warning"), 9u);
  EXPECT_EQ(DisplayWidth("\x1b[31mred\x1b[0m"), 3u);
  EXPECT_EQ(DisplayWidth("\x1b[1;33mx"), 1u);
}

TEST(DisplayWidth, InvalidBytesTakeOneColumnEach) {
  EXPECT_EQ(DisplayWidth("\x80\x80"), 2u);  // Stray continuation bytes.
  EXPECT_EQ(DisplayWidth("\xe2\x94"), 1u);  // A cut-off code point.
  EXPECT_EQ(DisplayWidth("\xe2x"), 2u);     // A lead byte without its continuation.
  EXPECT_EQ(DisplayWidth("a\x1b[31"), 1u);  // An unfinished CSI sequence.
  EXPECT_EQ(DisplayWidth("\x1b"
                         "7a"),
            2u);  // ESC alone takes no column.
}

TEST(TruncateLine, CutsToWidthWithAnEllipsis) {
  EXPECT_EQ(TruncateLine("abcdefgh", 5, Style::Plain()), "abcd>");
  EXPECT_EQ(TruncateLine("abcde", 5, Style::Plain()), "abcde");
  EXPECT_EQ(TruncateLine("abcdefgh", 0, Style::Plain()), "abcdefgh");
  EXPECT_EQ(TruncateLine("├── ▁▂▃▄▅", 6, Style{.color = false, .unicode = true}), "├── ▁…");
}

TEST(TruncateLine, EscapeCodesTakeNoColumnsAndAreClosed) {
  const Style rich = Style::Rich();
  const std::string line = Paint("abcdef", Color::kRed, rich) + "ghij";
  const std::string cut = TruncateLine(line, 8, rich);
  EXPECT_EQ(DisplayWidth(cut), 8u);
  EXPECT_THAT(cut, StartsWith("\x1b[31mabcdef\x1b[0mg…"));
  EXPECT_THAT(cut, testing::EndsWith("\x1b[0m"));
}

TEST(TruncateLines, EveryLineFits) {
  EXPECT_EQ(TruncateLines("abcdef\n\nxy\n", 3, Style::Plain()), "ab>\n\nxy\n");
}

TEST(TruncateLine, ReadsEscapesAndCodePointsLikeDisplayWidth) {
  const Style plain = Style::Plain();
  // Whatever DisplayWidth counts, TruncateLine cuts to: the two never disagree.
  for (const std::string line : {"\x80\x80\x80\x80\x80", "\xe2x\xe2x\xe2x",
                                 "ab\x1b"
                                 "7cdefg",
                                 "\x1b[1;33m├── ▁▂▃▄▅\x1b[0m"}) {
    for (size_t width = 1; width < 8; ++width) {
      const std::string cut = TruncateLine(line, width, plain);
      EXPECT_LE(DisplayWidth(cut), width) << line << " " << width;
      if (DisplayWidth(line) > width) {
        EXPECT_EQ(DisplayWidth(cut), width) << line << " " << width;
      }
    }
  }
}

TEST(PadRight, PadsByDisplayWidth) {
  EXPECT_EQ(PadRight("✓", 3), "✓  ");
  EXPECT_EQ(PadRight("\x1b[2mab\x1b[0m", 3), "\x1b[2mab\x1b[0m ");
  EXPECT_EQ(PadRight("abcd", 2), "abcd");
}

TEST(Paint, OnlyWithColour) {
  EXPECT_EQ(Paint("x", Color::kRed, Style::Plain()), "x");
  EXPECT_EQ(Paint("x", Color::kRed, Style::Rich()), "\x1b[31mx\x1b[0m");
  EXPECT_EQ(Paint("", Color::kRed, Style::Rich()), "");
}

TEST(Sanitize, ReplacesControlCharacters) {
  EXPECT_EQ(Sanitize("a\x1b[2J\tb\r\n\x7f"), "a?[2J?b???");
  EXPECT_EQ(Sanitize("blocks.0 ✓"), "blocks.0 ✓");
}

TEST(RenderTable, PlainAscii) {
  Table table{.title = "T", .header = {"A", "Long header"}, .rows = {{"xyz", "1"}, {"✓"}}};
  EXPECT_EQ(RenderTable(table, Style::Plain()),
            "T\n"
            "+-----+-------------+\n"
            "| A   | Long header |\n"
            "+-----+-------------+\n"
            "| xyz | 1           |\n"
            "| ✓   |             |\n"
            "+-----+-------------+\n");
}

TEST(RenderTable, RichBoxDrawing) {
  Table table{.title = "", .header = {"A"}, .rows = {{"✓ ok"}}};
  EXPECT_EQ(RenderTable(table, Style{.color = false, .unicode = true}),
            "┌──────┐\n"
            "│ A    │\n"
            "├──────┤\n"
            "│ ✓ ok │\n"
            "└──────┘\n");
}

TEST(RenderPanel, TitleWiderThanContentWidensThePanel) {
  Panel panel{.title = "A very long panel title", .rows = {{"k", "v"}}};
  const std::string text = RenderPanel(panel, Style::Plain());
  EXPECT_EQ(text,
            "+-- A very long panel title --+\n"
            "|  k    v                     |\n"
            "+-----------------------------+\n");
}

}  // namespace
}  // namespace tracetorch::view
