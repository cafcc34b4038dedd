#include "view/terminal.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch::view {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;

TEST(QueryTerminalSize, ReadsAPseudoTerminalsSize) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  winsize ws{};
  ws.ws_col = 123;
  ws.ws_row = 45;
  ASSERT_EQ(ioctl(master, TIOCSWINSZ, &ws), 0);
  const TerminalSize size = QueryTerminalSize(slave);
  EXPECT_EQ(size.columns, 123u);
  EXPECT_EQ(size.rows, 45u);
  close(slave);
  close(master);
}

TEST(QueryTerminalSize, ZerosForAPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const TerminalSize size = QueryTerminalSize(fds[1]);
  EXPECT_EQ(size.columns, 0u);
  EXPECT_EQ(size.rows, 0u);
  close(fds[0]);
  close(fds[1]);
}

TEST(FitRows, KeepsOneRowFreeAndSaysWhatWasLeftOut) {
  const std::string frame = "1\n2\n3\n4\n5\n6\n";
  EXPECT_EQ(FitRows(frame, 7, 80, Style::Plain()), frame);  // 6 lines + the free row.
  EXPECT_EQ(FitRows(frame, 0, 80, Style::Plain()), frame);  // Unknown size.
  EXPECT_EQ(FitRows(frame, 5, 80, Style::Plain()),
            "1\n2\n3\n... 3 more lines (narrow the view with --filter or --type)\n");
  EXPECT_EQ(FitRows(frame, 5, 10, Style::Plain()), "1\n2\n3\n... 3 mor>\n");
  EXPECT_EQ(FitRows(frame, 4, 80, Style{.color = false, .unicode = true}),
            "1\n2\n… 4 more lines (narrow the view with --filter or --type)\n");
}

TEST(InPlaceScreen, FirstFrameClearsTheScreenLaterOnesDrawOver) {
  InPlaceScreen screen;
  EXPECT_EQ(screen.Leave(), "");
  EXPECT_EQ(screen.Draw("a\nbc\n", TerminalSize{}, Style::Plain()),
            "\x1b[H\x1b[2J"
            "a\x1b[K\n"
            "bc\x1b[K"
            "\x1b[J");
  EXPECT_EQ(screen.Draw("x\n", TerminalSize{}, Style::Plain()), "\x1b[Hx\x1b[K\x1b[J");
  EXPECT_EQ(screen.Leave(), "\n");
}

TEST(InPlaceScreen, FitsTheFrameToTheRows) {
  InPlaceScreen screen;
  const std::string text =
      screen.Draw("1\n2\n3\n4\n5\n", TerminalSize{.columns = 80, .rows = 4}, Style::Plain());
  EXPECT_THAT(text, HasSubstr("1\x1b[K\n2\x1b[K\n... 3 more lines"));
  EXPECT_THAT(text, EndsWith("--type)\x1b[K\x1b[J"));
}

// Restores the calling thread's signal mask and drops pending SIGINT/SIGTERM.
class SignalWaiterTest : public ::testing::Test {
 protected:
  void SetUp() override { pthread_sigmask(SIG_SETMASK, nullptr, &saved_); }
  void TearDown() override { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  sigset_t saved_;
};

TEST_F(SignalWaiterTest, TheIntervalPassesWithoutASignal) {
  const Waiter wait = MakeSignalWaiter();
  EXPECT_TRUE(wait(absl::ZeroDuration()));
  EXPECT_TRUE(wait(absl::Milliseconds(1)));
}

TEST_F(SignalWaiterTest, SigintAndSigtermEndTheWait) {
  const Waiter wait = MakeSignalWaiter();
  sigset_t blocked;
  pthread_sigmask(SIG_SETMASK, nullptr, &blocked);
  EXPECT_EQ(sigismember(&blocked, SIGINT), 1);
  EXPECT_EQ(sigismember(&blocked, SIGTERM), 1);
  // Blocked, so raise() leaves each pending for sigtimedwait: no handler runs, the process lives.
  for (const int sig : {SIGINT, SIGTERM}) {
    ASSERT_EQ(raise(sig), 0);
    EXPECT_FALSE(wait(absl::Hours(1))) << sig;       // Returns at once, not after the hour.
    EXPECT_TRUE(wait(absl::ZeroDuration())) << sig;  // Taken: not pending any more.
  }
}

}  // namespace
}  // namespace tracetorch::view
