// For tests of permission errors, which CI runs as root: root ignores file and directory
// permissions, so the check runs in a child process that first drops to an unprivileged user
// (nobody, 65534) when it is root. The child's exit code says whether `check` held; a child that
// cannot drop privileges fails the test too (exit 2), so the check never passes vacuously.
//
// Example:
//   ASSERT_EQ(chmod(dir.c_str(), 0500), 0);
//   ExpectAsUnprivileged([&] { return Write(dir + "/x").code() == kPermissionDenied; });
//
// Header-only; GoogleTest death-test machinery (fork), so call it from the test's main thread.
#ifndef TRACETORCH_TRACE_TESTING_UNPRIVILEGED_H_
#define TRACETORCH_TRACE_TESTING_UNPRIVILEGED_H_

#include <unistd.h>

#include <functional>

#include "gtest/gtest.h"

namespace tracetorch::testing {

inline constexpr uid_t kNobody = 65534;

// Runs `check` as an unprivileged user; expects it to return true.
inline void ExpectAsUnprivileged(const std::function<bool()>& check) {
  EXPECT_EXIT(
      {
        if (::geteuid() == 0 && (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0)) ::_exit(2);
        ::_exit(check() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace tracetorch::testing

#endif  // TRACETORCH_TRACE_TESTING_UNPRIVILEGED_H_
