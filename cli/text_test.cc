#include "cli/text.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch::cli {
namespace {

TEST(DisplayWidth, CountsCodePointsAndSkipsEscapes) {
  EXPECT_EQ(DisplayWidth(""), 0u);
  EXPECT_EQ(DisplayWidth("abc"), 3u);
  EXPECT_EQ(DisplayWidth("│ ├── ✓"), 7u);
  EXPECT_EQ(DisplayWidth("⚠ warning"), 9u);
  EXPECT_EQ(DisplayWidth("\x1b[31mred\x1b[0m"), 3u);
  EXPECT_EQ(DisplayWidth("\x1b[1;33mx"), 1u);
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
}  // namespace tracetorch::cli
