#include "daemon/store_pg/postgres_server.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tracetorch::daemon::test_util {
namespace {

constexpr uid_t kNobody = 65534;
constexpr int kPort = 5432;  // Only names the socket file: the directory is ours alone.

std::string FindBindir() {
  std::error_code ec;
  std::string best;
  for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string bin = (e.path() / "bin").string();
    if (access((bin + "/postgres").c_str(), X_OK) == 0 && bin > best) best = bin;
  }
  return best;
}

// Runs `argv` as nobody when root, stdout/stderr appended to `log`; returns the child's pid.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  // Everything the child needs is made before fork: only async-signal-safe calls after it.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (geteuid() == 0 && (setgid(kNobody) != 0 || setuid(kNobody) != 0)) _exit(126);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  execv(args[0], args.data());
  _exit(127);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start() {
  std::unique_ptr<PostgresServer> s(new PostgresServer());
  s->bindir_ = FindBindir();
  if (s->bindir_.empty()) {
    return absl::NotFoundError(
        "no PostgreSQL server in /usr/lib/postgresql/*/bin (Debian package postgresql)");
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "ttpg_XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  s->dir_ = tmpl;
  if (geteuid() == 0 && chown(s->dir_.c_str(), kNobody, kNobody) != 0) {
    return absl::InternalError(absl::StrCat("cannot chown ", s->dir_, " to nobody"));
  }
  s->url_ =
      absl::StrCat("postgresql:///postgres?host=", s->dir_, "&port=", kPort, "&user=tracetorch");
  const pid_t initdb = Spawn({s->bindir_ + "/initdb", "-D", s->dir_ + "/data", "-A", "trust", "-U",
                              "tracetorch", "-E", "UTF8", "--no-sync", "--no-instructions"},
                             s->dir_ + "/log");
  int status = 0;
  if (initdb < 0 || waitpid(initdb, &status, 0) != initdb || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("initdb failed: ", s->LogTail()));
  }
  if (absl::Status st = s->Launch(); !st.ok()) return st;
  return s;
}

absl::Status PostgresServer::Launch() {
  pid_ = Spawn({bindir_ + "/postgres", "-D", dir_ + "/data", "-k", dir_, "-p", absl::StrCat(kPort),
                "-c", "listen_addresses=", "-c", "fsync=off"},
               dir_ + "/log");
  if (pid_ < 0) return absl::InternalError("fork failed");
  const std::string ping = absl::StrCat("host=", dir_, " port=", kPort, " user=tracetorch");
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    if (PQping(ping.c_str()) == PQPING_OK) return absl::OkStatus();
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat("postgres exited: ", LogTail()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::InternalError(absl::StrCat("postgres did not start in 60 s: ", LogTail()));
}

absl::Status PostgresServer::Stop() {
  if (pid_ <= 0) return absl::OkStatus();
  kill(pid_, SIGINT);  // Fast shutdown.
  int status = 0;
  const pid_t got = waitpid(pid_, &status, 0);
  pid_ = -1;
  return got > 0 ? absl::OkStatus() : absl::InternalError("waitpid(postgres) failed");
}

absl::Status PostgresServer::Restart() {
  if (absl::Status s = Stop(); !s.ok()) return s;
  return Launch();
}

PostgresServer::~PostgresServer() {
  (void)Stop();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string PostgresServer::LogTail() const {
  std::ifstream in(dir_ + "/log");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

}  // namespace tracetorch::daemon::test_util
