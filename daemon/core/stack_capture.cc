#include "daemon/core/stack_capture.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace tracetorch::daemon {
namespace {

constexpr int kCapSysPtrace = 19;

// Whether the effective capability set of this process holds CAP_SYS_PTRACE.
bool HasPtraceCapability() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    uint64_t caps = 0;
    std::string hex(absl::StripAsciiWhitespace(line.substr(7)));
    if (!absl::SimpleHexAtoi(hex, &caps)) return false;
    return (caps >> kCapSysPtrace) & 1;
  }
  return false;
}

// The program's path: `name` itself when it holds a '/', else the first executable in PATH.
std::string Find(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

ThreadStacksResult Refused(std::string tool, std::string why) {
  ThreadStacksResult r;
  r.tool = std::move(tool);
  r.error = std::move(why);
  return r;
}

}  // namespace

absl::StatusOr<StackPolicy> ParseStackPolicy(const std::string& text) {
  if (text == "off") return StackPolicy::kOff;
  if (text == "same-user") return StackPolicy::kSameUser;
  if (text == "any-user") return StackPolicy::kAnyUser;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown stack policy '", text, "' (off, same-user or any-user)"));
}

bool MayTrace(StackPolicy policy, int32_t uid, std::string* why_not) {
  switch (policy) {
    case StackPolicy::kOff:
      *why_not = "not taken: stacks are off (--stacks=off)";
      return false;
    case StackPolicy::kSameUser:
      if (uid >= 0 && static_cast<uid_t>(uid) == geteuid()) return true;
      *why_not = absl::StrCat("not taken: a process of uid ", uid, ", the daemon runs as uid ",
                              geteuid(), " (--stacks=any-user with CAP_SYS_PTRACE allows it)");
      return false;
    case StackPolicy::kAnyUser:
      if ((uid >= 0 && static_cast<uid_t>(uid) == geteuid()) || HasPtraceCapability()) {
        return true;
      }
      *why_not = absl::StrCat("not taken: a process of uid ", uid,
                              " and the daemon has no CAP_SYS_PTRACE");
      return false;
  }
  return false;
}

absl::StatusOr<std::string> RunTool(const std::vector<std::string>& argv, absl::Duration timeout,
                                    size_t max_bytes) {
  const std::string program = Find(argv.at(0));
  if (program.empty()) return absl::NotFoundError(absl::StrCat(argv[0], " is not installed"));
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The daemon blocks its shutdown signals and ignores SIGPIPE: the tool gets the defaults.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGHUP);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t child = -1;
  const int rc = posix_spawn(&child, program.c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    return absl::InternalError(absl::StrCat("cannot run ", program, ": ", std::strerror(rc)));
  }
  std::string out;
  const absl::Time deadline = absl::Now() + timeout;
  bool timed_out = false;
  while (true) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buf[8192];
    const ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < max_bytes)
      out.append(buf, std::min(static_cast<size_t>(n), max_bytes - out.size()));
  }
  close(pipe_fds[0]);
  if (timed_out) kill(child, SIGKILL);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat(argv[0], " did not finish within ", absl::FormatDuration(timeout)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    // eu-stack exits 1 when one thread could not be unwound, after printing the others.
    if (out.empty()) {
      return absl::InternalError(absl::StrCat(argv[0], " failed (wait status ", status, ")"));
    }
    absl::StrAppend(&out, "\n(", argv[0], " ended with wait status ", status, ")\n");
  }
  return out;
}

ToolStackCapturer::ToolStackCapturer(ToolStackCapturerOptions options)
    : options_(std::move(options)) {}

std::vector<ThreadStacksResult> ToolStackCapturer::Capture(const StackTarget& target) {
  std::vector<ThreadStacksResult> out;
  auto take = [&](const std::string& tool, const std::vector<std::string>& argv) {
    ThreadStacksResult r;
    r.tool = tool;
    std::string why_not;
    if (!MayTrace(options_.policy, target.uid, &why_not)) {
      r.error = why_not;
    } else {
      absl::StatusOr<std::string> text = RunTool(argv, options_.timeout, options_.max_bytes);
      if (text.ok()) {
        r.text = *std::move(text);
        r.taken = absl::Now();
      } else {
        r.error = std::string(text.status().message());
      }
    }
    out.push_back(std::move(r));
  };
  if (target.pid <= 0) {
    out.push_back(Refused("eu-stack", "not taken: the process's pid is not known"));
    return out;
  }
  const std::string pid = absl::StrCat(target.pid);
  take("eu-stack", {options_.eu_stack, "-p", pid});
  if (target.python) {
    if (Find(options_.py_spy).empty()) {
      out.push_back(Refused("py-spy", "not taken: py-spy is not installed"));
    } else {
      // --nonblocking reads the memory without pausing it first: a stopped (SIGSTOP) process
      // cannot be paused again, and a stalled one is not moving anyway.
      take("py-spy", {options_.py_spy, "dump", "--nonblocking", "--pid", pid});
    }
  }
  return out;
}

}  // namespace tracetorch::daemon
