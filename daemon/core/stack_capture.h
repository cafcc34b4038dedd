// Takes a stuck process's thread stacks with existing unwinders, run as child processes with a
// deadline: elfutils' eu-stack (native frames of every thread; Debian's `elfutils`) and, for a
// Python process where it is installed, py-spy (`py-spy dump`: the Python frames). Both attach
// with ptrace(2), which the kernel allows the same uid (under Yama's ptrace_scope 0) or
// CAP_SYS_PTRACE.
//
// Never a requirement, never by default on another user's process: with the default policy
// (kSameUser) only a process of the daemon's own uid is stacked; kAnyUser also stacks other uids'
// processes when the daemon holds CAP_SYS_PTRACE; kOff takes none. Each refusal, a missing tool or
// a failure is one ThreadStacksResult with `error` set, so a bundle says why it has no stacks.
//
// Thread-safe: Capture() may run on several threads (each runs its own children).
#ifndef TRACETORCH_DAEMON_CORE_STACK_CAPTURE_H_
#define TRACETORCH_DAEMON_CORE_STACK_CAPTURE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tracetorch::daemon {

enum class StackPolicy { kOff, kSameUser, kAnyUser };
// "off", "same-user", "any-user"; InvalidArgument otherwise.
absl::StatusOr<StackPolicy> ParseStackPolicy(const std::string& text);

struct ThreadStacksResult {
  std::string tool = "";   // "eu-stack", "py-spy"
  std::string text = "";   // Its output, at most max_bytes.
  std::string error = "";  // Set when none was taken, and why.
  absl::Time taken = absl::InfinitePast();
};

// What a stuck process is, for the capturer.
struct StackTarget {
  int32_t pid = -1;
  int32_t uid = -1;
  bool python = false;  // Also its Python frames (py-spy), where installed.
};

class StackCapturer {
 public:
  virtual ~StackCapturer() = default;
  virtual std::vector<ThreadStacksResult> Capture(const StackTarget& target) = 0;
};

struct ToolStackCapturerOptions {
  StackPolicy policy = StackPolicy::kSameUser;
  std::string eu_stack = "eu-stack";  // A path, or a name looked up in PATH.
  std::string py_spy = "py-spy";
  absl::Duration timeout = absl::Seconds(10);  // Per tool; then it is killed.
  size_t max_bytes = 256 << 10;                // Of each tool's output.
};

class ToolStackCapturer final : public StackCapturer {
 public:
  explicit ToolStackCapturer(ToolStackCapturerOptions options);
  std::vector<ThreadStacksResult> Capture(const StackTarget& target) override;

 private:
  const ToolStackCapturerOptions options_;
};

// Runs `argv` (argv[0] looked up in PATH) with stdin from /dev/null, collecting stdout and stderr
// together up to `max_bytes`; kills it at `timeout`. NotFound when the program is not installed;
// DeadlineExceeded when it was killed; Internal when it fails without output (output with a
// non-zero status is returned, with a line saying so).
absl::StatusOr<std::string> RunTool(const std::vector<std::string>& argv, absl::Duration timeout,
                                    size_t max_bytes);

// Whether this process may ptrace a process of `uid` under `policy`.
bool MayTrace(StackPolicy policy, int32_t uid, std::string* why_not);

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_STACK_CAPTURE_H_
