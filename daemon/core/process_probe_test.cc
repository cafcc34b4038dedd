#include "daemon/core/process_probe.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"

extern char** environ;

namespace tracetorch::daemon {
namespace {

pid_t Spawn(std::vector<const char*> argv) {
  argv.push_back(nullptr);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawnp(&pid, argv[0], nullptr, nullptr, const_cast<char**>(argv.data()), environ),
            0);
  return pid;
}

TEST(ProcessProbe, DecodesWaitStatuses) {
  EXPECT_EQ(DecodeExitStatus(SIGKILL).description, "killed by SIGKILL");
  EXPECT_EQ(DecodeExitStatus(SIGSEGV | 0x80).description, "killed by SIGSEGV (core dumped)");
  EXPECT_TRUE(DecodeExitStatus(SIGSEGV | 0x80).core_dumped);
  EXPECT_EQ(DecodeExitStatus(3 << 8).description, "exited with code 3");
  EXPECT_EQ(DecodeExitStatus(3 << 8).code, 3);
  EXPECT_EQ(DecodeExitStatus(SIGABRT).signal, SIGABRT);
}

TEST(ProcessProbe, ReadsThisProcess) {
  absl::StatusOr<ProcStat> stat = ReadProcStat(getpid());
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->state, 'R');
  EXPECT_GT(stat->start_time, 0u);
  EXPECT_EQ(ProcessProbe::Open(0).status().code(), absl::StatusCode::kInvalidArgument);
}

// The exit status is read from the zombie, before the parent (this test) reaps it.
TEST(ProcessProbe, FollowsAChildToItsExitSignal) {
  const pid_t child = Spawn({"sleep", "600"});
  absl::StatusOr<std::unique_ptr<ProcessProbe>> probe = ProcessProbe::Open(child);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_FALSE((*probe)->Exited());
  EXPECT_FALSE((*probe)->Exit().has_value());
  EXPECT_FALSE((*probe)->Stopped());
  kill(child, SIGSTOP);
  EXPECT_TRUE(test_util::WaitFor([&] { return (*probe)->Stopped(); }));
  kill(child, SIGCONT);
  EXPECT_TRUE(test_util::WaitFor([&] { return !(*probe)->Stopped(); }));
  kill(child, SIGKILL);
  ASSERT_TRUE(test_util::WaitFor([&] { return (*probe)->Exited(); }));
  std::optional<ProcessExit> exit = (*probe)->Exit();
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->known);
  EXPECT_EQ(exit->signal, SIGKILL);
  int status;
  waitpid(child, &status, 0);
  // Reaped: the status is gone, and the probe says why it does not know.
  exit = (*probe)->Exit();
  ASSERT_TRUE(exit.has_value());
  EXPECT_FALSE(exit->known);
  EXPECT_NE(exit->description.find("reaped"), std::string::npos);
  EXPECT_EQ(ProcessProbe::Open(child).status().code(), absl::StatusCode::kNotFound);
}

TEST(ProcessProbe, ReadsAnExitCode) {
  const pid_t child = Spawn({"sh", "-c", "exit 3"});
  absl::StatusOr<std::unique_ptr<ProcessProbe>> probe = ProcessProbe::Open(child);
  if (!probe.ok()) {
    // It may have exited already and been... no: it is our child and not reaped: a zombie.
    FAIL() << probe.status();
  }
  ASSERT_TRUE(test_util::WaitFor([&] { return (*probe)->Exited(); }));
  std::optional<ProcessExit> exit = (*probe)->Exit();
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->description, "exited with code 3");
  int status;
  waitpid(child, &status, 0);
}

}  // namespace
}  // namespace tracetorch::daemon
