// For the tests of the `tracetorch` command line (not part of the command): runs it in-process,
// as main() would, with its output captured, and names the shared fixture files.
//
// Example:
//   const CliResult r = RunCli({"inspect", Fixture("train_trace.json")});
//   EXPECT_EQ(r.code, kExitOk) << r.err;
//   ExpectOneLineError(RunCli({"inspect", "nope.json"}));
//
// Header-only; thread-compatible (RunTracetorch is).
#ifndef TRACETORCH_CLI_TEST_UTIL_H_
#define TRACETORCH_CLI_TEST_UTIL_H_

#include <sstream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/remote_commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch::cli::test_util {

struct CliResult {
  int code = -1;    // The exit code.
  std::string out;  // Everything written to stdout.
  std::string err;  // ... and to stderr.
};

// What the command sees of its terminal.
struct CliTerminal {
  bool stdout_is_tty = false;
  bool no_color = false;  // NO_COLOR is set.
};

// Runs `tracetorch ARGS...`. A `watch` stops at its first wait (the Waiter returns false), so a
// watch command returns after its first frame.
inline CliResult RunCli(std::vector<std::string> args, CliTerminal terminal = {}) {
  args.insert(args.begin(), "tracetorch");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out;
  std::ostringstream err;
  const view::CliEnvironment env{.out = &out,
                                 .err = &err,
                                 .stdout_is_tty = terminal.stdout_is_tty,
                                 .no_color = terminal.no_color,
                                 .wait = [](absl::Duration) { return false; }};
  CliResult result;
  result.code = RunTracetorch(static_cast<int>(argv.size()), argv.data(), env);
  result.out = out.str();
  result.err = err.str();
  return result;
}

// Exit code 2 and one line on stderr, starting "tracetorch: " (commands.h).
inline void ExpectOneLineError(const CliResult& r) {
  EXPECT_EQ(r.code, view::kExitUsage) << r.out << r.err;
  EXPECT_THAT(r.err, ::testing::StartsWith("tracetorch: "));
  EXPECT_THAT(r.err, ::testing::EndsWith("\n"));
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

#ifdef TRACETORCH_FIXTURES_DIR
// tests/fixtures/upstream/NAME (a test target defines TRACETORCH_FIXTURES_DIR).
inline std::string Fixture(const std::string& name) {
  return std::string(TRACETORCH_FIXTURES_DIR) + "/upstream/" + name;
}
#endif

}  // namespace tracetorch::cli::test_util

#endif  // TRACETORCH_CLI_TEST_UTIL_H_
