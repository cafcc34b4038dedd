#include "daemon/core/process_probe.h"

#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tracetorch::daemon {
namespace {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", sig);
}

// The owner of /proc/PID (the process's uid), or -1.
int64_t ProcUid(int32_t pid) {
  struct stat st;
  if (stat(absl::StrCat("/proc/", pid).c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_uid);
}

}  // namespace

absl::StatusOr<ProcStat> ReadProcStat(int32_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  if (!in) return absl::NotFoundError(absl::StrCat("no process ", pid));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  // "pid (comm) S ...": comm may hold spaces and parentheses; the fields follow the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) {
    return absl::InternalError(absl::StrCat("unreadable /proc/", pid, "/stat"));
  }
  const std::vector<std::string> fields =
      absl::StrSplit(text.substr(close + 2), ' ', absl::SkipEmpty());
  ProcStat stat;
  if (fields.empty() || fields[0].empty()) {
    return absl::InternalError(absl::StrCat("unreadable /proc/", pid, "/stat"));
  }
  stat.state = fields[0][0];
  // Field n of stat(5) is fields[n - 3] here.
  if (fields.size() > 19) (void)absl::SimpleAtoi(fields[19], &stat.start_time);
  if (fields.size() > 49) (void)absl::SimpleAtoi(fields[49], &stat.exit_code);
  return stat;
}

ProcessExit DecodeExitStatus(int status) {
  ProcessExit e;
  e.known = true;
  if (WIFSIGNALED(status)) {
    e.signal = WTERMSIG(status);
    e.core_dumped = WCOREDUMP(status);
    e.description =
        absl::StrCat("killed by ", SignalName(e.signal), e.core_dumped ? " (core dumped)" : "");
  } else {
    e.code = WEXITSTATUS(status);
    e.description = absl::StrCat("exited with code ", e.code);
  }
  return e;
}

absl::StatusOr<std::unique_ptr<ProcessProbe>> ProcessProbe::Open(int32_t pid) {
  if (pid <= 0) return absl::InvalidArgumentError(absl::StrCat("no usable pid (", pid, ")"));
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    const int err = errno;
    if (err == ESRCH) return absl::NotFoundError(absl::StrCat("no process ", pid));
    return absl::UnavailableError(absl::StrCat("pidfd_open(", pid, "): ", std::strerror(err)));
  }
  absl::StatusOr<ProcStat> stat = ReadProcStat(pid);
  if (!stat.ok()) {
    close(fd);
    return stat.status();
  }
  return std::unique_ptr<ProcessProbe>(new ProcessProbe(pid, fd, stat->start_time));
}

ProcessProbe::ProcessProbe(int32_t pid, int pidfd, uint64_t start_time)
    : pid_(pid), pidfd_(pidfd), start_time_(start_time) {}

ProcessProbe::~ProcessProbe() { close(pidfd_); }

bool ProcessProbe::Exited() const {
  pollfd p{pidfd_, POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP)) != 0;
}

bool ProcessProbe::Stopped() const {
  if (Exited()) return false;
  absl::StatusOr<ProcStat> stat = ReadProcStat(pid_);
  return stat.ok() && stat->start_time == start_time_ && (stat->state == 'T' || stat->state == 't');
}

std::optional<ProcessExit> ProcessProbe::Exit() const {
  if (!Exited()) return std::nullopt;
  absl::StatusOr<ProcStat> stat = ReadProcStat(pid_);
  if (!stat.ok() || stat->start_time != start_time_ || stat->state != 'Z') {
    return ProcessExit{.known = false,
                       .description = "unknown (its parent reaped it before the daemon read it)"};
  }
  const int64_t uid = ProcUid(pid_);
  if (geteuid() != 0 && uid != static_cast<int64_t>(geteuid())) {
    return ProcessExit{.known = false,
                       .description = absl::StrCat("unknown (a process of uid ", uid,
                                                   "; the daemon may read only its own uid's)")};
  }
  return DecodeExitStatus(stat->exit_code);
}

}  // namespace tracetorch::daemon
