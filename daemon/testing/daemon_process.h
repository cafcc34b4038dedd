// A tracetorchd binary run as a child process for the daemon's crash and abuse tests (not part of
// tracetorchd): started on sockets and a data directory under `dir`, killed (SIGKILL) or stopped
// (SIGTERM) by the test, its CPU time readable from /proc. Output goes to dir/daemon.log.
//
// Thread-compatible. The destructor SIGKILLs a child still running.
#ifndef TRACETORCH_DAEMON_TESTING_DAEMON_PROCESS_H_
#define TRACETORCH_DAEMON_TESTING_DAEMON_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tracetorch::daemon::test_util {

class DaemonProcess {
 public:
  // Runs `binary` --socket dir/d.sock --service-socket dir/s.sock --data-dir dir/data `args`...,
  // with the environment variable `env` set to `env_value` (unset when `env_value` is empty).
  DaemonProcess(const std::string& binary, std::string dir, const std::vector<std::string>& args,
                const std::string& env = "", const std::string& env_value = "")
      : dir_(std::move(dir)) {
    std::vector<std::string> argv_s = {
        binary,         "--socket",   socket_path(), "--service-socket",
        service_path(), "--data-dir", data_dir()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    // Everything the child needs is made before fork(): the test process has threads (a client's
    // sender), so the child calls only async-signal-safe functions (open, dup2, execve, _exit).
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view kv(*e);
      if (!env.empty() && kv.substr(0, env.size() + 1) == env + "=") continue;
      env_s.emplace_back(kv);
    }
    if (!env.empty() && !env_value.empty()) env_s.push_back(env + "=" + env_value);
    std::vector<char*> argv, envp;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::string log = dir_ + "/daemon.log";
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
  }
  ~DaemonProcess() {
    if (pid_ > 0) Kill();
  }
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  pid_t pid() const { return pid_; }
  std::string socket_path() const { return dir_ + "/d.sock"; }
  std::string service_path() const { return dir_ + "/s.sock"; }
  std::string data_dir() const { return dir_ + "/data"; }

  void Kill() {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // SIGTERM, then waits; the exit status (-1 when it did not exit normally).
  int Stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // User + system CPU seconds the running child has used (/proc/<pid>/stat); -1 when unreadable.
  double CpuSeconds() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) return -1;
    std::istringstream fields(stat.substr(paren + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {  // Fields 14 and 15: utime, stime.
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

  // The resident set size of the running child in bytes (/proc/<pid>/statm); 0 when unreadable.
  size_t RssBytes() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/statm");
    size_t pages = 0, resident = 0;
    if (!(in >> pages >> resident)) return 0;
    return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  }

 private:
  const std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace tracetorch::daemon::test_util

#endif  // TRACETORCH_DAEMON_TESTING_DAEMON_PROCESS_H_
