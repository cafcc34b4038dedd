#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "guest/backoff.h"
#include "guest/fork.h"
#include "guest/hook_guard.h"
#include "guest/log.h"

namespace tracetorch::guest {
namespace {

TEST(Backoff, DoublesUpToTheCapWithinTheJitter) {
  Backoff b({.initial = absl::Milliseconds(100), .max = absl::Milliseconds(450), .jitter = 0.25});
  const absl::Duration expected[] = {absl::Milliseconds(100), absl::Milliseconds(200),
                                     absl::Milliseconds(400), absl::Milliseconds(450),
                                     absl::Milliseconds(450)};
  for (absl::Duration base : expected) {
    EXPECT_EQ(b.current(), base);
    const absl::Duration w = b.Next();
    EXPECT_GE(w, base * 0.75);
    EXPECT_LT(w, base * 1.25);
  }
  b.Reset();
  EXPECT_EQ(b.current(), absl::Milliseconds(100));
}

TEST(Backoff, JitterSpreadsTheWaits) {
  Backoff b({.initial = absl::Seconds(1), .max = absl::Seconds(1), .seed = 42});
  absl::Duration lo = absl::InfiniteDuration(), hi = absl::ZeroDuration();
  for (int i = 0; i < 200; ++i) {
    const absl::Duration w = b.Next();
    lo = std::min(lo, w);
    hi = std::max(hi, w);
  }
  EXPECT_LT(lo, absl::Milliseconds(850));
  EXPECT_GT(hi, absl::Milliseconds(1150));
}

TEST(Backoff, NoJitterIsExact) {
  Backoff b({.initial = absl::Milliseconds(10), .max = absl::Milliseconds(40), .jitter = 0});
  EXPECT_EQ(b.Next(), absl::Milliseconds(10));
  EXPECT_EQ(b.Next(), absl::Milliseconds(20));
  EXPECT_EQ(b.Next(), absl::Milliseconds(40));
  EXPECT_EQ(b.Next(), absl::Milliseconds(40));
}

TEST(ForkOwner, IsInertOnlyInTheChild) {
  ForkOwner owner;
  EXPECT_FALSE(owner.InForkedChild());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // In the child: the object made before the fork knows; one made here does not.
    ForkOwner mine;
    _exit(owner.InForkedChild() && !mine.InForkedChild() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(owner.InForkedChild());
}

TEST(GuardHook, CountsWhatItCatches) {
  HookErrors errors;
  EXPECT_TRUE(GuardHook(errors, "guest_test_ok", [] {}));
  EXPECT_EQ(errors.count(), 0);
  EXPECT_FALSE(GuardHook(errors, "guest_test_throw", [] { throw std::runtime_error("boom"); }));
  EXPECT_FALSE(GuardHook(errors, "guest_test_throw", [] { throw std::bad_alloc(); }));
  EXPECT_FALSE(GuardHook(errors, "guest_test_other", [] { throw 7; }));
  EXPECT_EQ(errors.count(), 3);
  errors.Reset();
  EXPECT_EQ(errors.count(), 0);
}

TEST(WarnOnce, LogsACauseOnce) {
  EXPECT_TRUE(WarnOnce("guest_test_cause", "first"));
  EXPECT_FALSE(WarnOnce("guest_test_cause", "second"));
  EXPECT_TRUE(WarnOnce("guest_test_cause_2", "another cause"));
}

TEST(WarnOnce, IsSilentInAForkedChild) {
  WarnOnce("guest_test_before_fork", "the parent logs");  // The log's state exists before the fork.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(30);  // A deadlock fails the test instead of hanging it.
    _exit(WarnOnce("guest_test_new_in_child", "never logged") ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(WarnOnce("guest_test_new_in_child", "the parent still logs it"));
}

TEST(GuardHook, LogsOncePerCause) {
  HookErrors errors;
  GuardHook(errors, "guest_test_logged", [] { throw std::runtime_error("x"); });
  // The guard logged this cause: WarnOnce now finds it seen.
  EXPECT_FALSE(WarnOnce("guest_test_logged", "again"));
}

}  // namespace
}  // namespace tracetorch::guest
