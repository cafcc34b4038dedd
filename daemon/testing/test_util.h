// Helpers shared by the daemon's tests (not part of tracetorchd): a temporary directory removed
// with its contents, and a poll with a deadline for conditions another thread or process makes
// true.
#ifndef TRACETORCH_DAEMON_TESTING_TEST_UTIL_H_
#define TRACETORCH_DAEMON_TESTING_TEST_UTIL_H_

#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tracetorch::daemon::test_util {

// A fresh directory <temp dir ($TMPDIR, else /tmp)>/<prefix>_XXXXXX, removed recursively on
// destruction.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "ttd") {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / (std::string(prefix) + "_XXXXXX")).string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Polls `pred` every 5 ms until it holds or `timeout` passes; returns its last value.
inline bool WaitFor(const std::function<bool()>& pred, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return pred();
}

}  // namespace tracetorch::daemon::test_util

#endif  // TRACETORCH_DAEMON_TESTING_TEST_UTIL_H_
