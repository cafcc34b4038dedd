#include "view/command_io.h"

#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace tracetorch::view {
namespace {

TEST(Fail, OneLineOnStderrAndExit2) {
  std::ostringstream out;
  std::ostringstream err;
  const CliEnvironment env{.out = &out, .err = &err, .wait = {}};
  EXPECT_EQ(Fail(env, "bad\r\nthing\nhere\r"), kExitUsage);
  EXPECT_EQ(err.str(), "tracetorch: bad thing here \n");
  EXPECT_EQ(out.str(), "");
}

TEST(PrintLine, EndsWithOneNewline) {
  std::ostringstream out;
  std::ostringstream err;
  const CliEnvironment env{.out = &out, .err = &err, .wait = {}};
  PrintLine("a", env);
  PrintLine("b\n", env);
  PrintLine("", env);
  EXPECT_EQ(out.str(), "a\nb\n\n");
}

TEST(Note, OneLineOnStderr) {
  std::ostringstream out;
  std::ostringstream err;
  const CliEnvironment env{.out = &out, .err = &err, .wait = {}};
  Note(env, "t.json: kept\nthis");
  EXPECT_EQ(err.str(), "tracetorch: note: t.json: kept this\n");
  EXPECT_EQ(out.str(), "");
}

TEST(ChooseStyle, AutoFollowsTerminalAndNoColor) {
  EXPECT_TRUE(ChooseStyle("auto", true, false).color);
  EXPECT_TRUE(ChooseStyle("auto", true, false).unicode);
  EXPECT_FALSE(ChooseStyle("auto", false, false).color);
  EXPECT_FALSE(ChooseStyle("auto", false, false).unicode);
  EXPECT_FALSE(ChooseStyle("auto", true, true).color);
  EXPECT_FALSE(ChooseStyle("auto", true, true).unicode);
  EXPECT_TRUE(ChooseStyle("always", false, true).color);
  EXPECT_FALSE(ChooseStyle("never", true, false).color);
}

}  // namespace
}  // namespace tracetorch::view
