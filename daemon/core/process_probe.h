// Follows one traced process from outside: whether it still runs, is stopped (SIGSTOP, a
// debugger) or has exited, and how it ended. A pidfd (pidfd_open(2)) pins the process the probe
// was opened for, so a pid reused later is never mistaken for it; it becomes readable (POLLIN)
// the moment the process exits, which is when the daemon reads the exit status from
// /proc/PID/stat (field 52, exit_code: set while the process is a zombie, until its parent reaps
// it; the start time, field 22, is checked to be the probe's process).
//
// The exit status is another process's: the kernel shows it only to the same uid or to
// CAP_SYS_PTRACE, so the probe reads it only for a process of the daemon's own uid, or any uid
// when the daemon runs as root; otherwise, and when the parent reaped the process first, the exit
// is `known = false` with the reason.
//
// Thread-compatible: one thread polls a probe; fd() may be polled anywhere.
#ifndef TRACETORCH_DAEMON_CORE_PROCESS_PROBE_H_
#define TRACETORCH_DAEMON_CORE_PROCESS_PROBE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/core/flight_status.h"

namespace tracetorch::daemon {

// A process as /proc/PID/stat shows it.
struct ProcStat {
  char state = '?';         // R, S, D, T (stopped), t (traced), Z (zombie), ...
  uint64_t start_time = 0;  // Clock ticks after boot (field 22).
  int exit_code = 0;        // waitpid(2)-style status (field 52); 0 unless a zombie.
};
// Reads /proc/PID/stat. NotFound when there is no such process.
absl::StatusOr<ProcStat> ReadProcStat(int32_t pid);
// "killed by SIGKILL", "killed by SIGSEGV (core dumped)", "exited with code 3".
ProcessExit DecodeExitStatus(int status);

class ProcessProbe {
 public:
  // Opens a pidfd for `pid` and records its start time. NotFound when the process is gone;
  // InvalidArgument for pid <= 0 (a peer in a pid namespace the daemon cannot see);
  // Unavailable when the kernel has no pidfd_open.
  static absl::StatusOr<std::unique_ptr<ProcessProbe>> Open(int32_t pid);
  ~ProcessProbe();
  ProcessProbe(const ProcessProbe&) = delete;
  ProcessProbe& operator=(const ProcessProbe&) = delete;

  int32_t pid() const { return pid_; }
  int fd() const { return pidfd_; }  // POLLIN once the process exited.

  // Whether the process has exited (never waits).
  bool Exited() const;
  // Stopped by a signal or a tracer (state T or t): alive, but making no progress.
  bool Stopped() const;
  // How it ended: read once it Exited() (nullopt before). Unknown (known = false, with the
  // reason) when its parent reaped it first or the daemon may not see another uid's status.
  std::optional<ProcessExit> Exit() const;

 private:
  ProcessProbe(int32_t pid, int pidfd, uint64_t start_time);

  const int32_t pid_;
  const int pidfd_;
  const uint64_t start_time_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_PROCESS_PROBE_H_
