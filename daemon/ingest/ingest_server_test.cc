// The ingest listener's socket handling on real sockets: claiming a path, the modes it sets, and
// access it cannot set being an error (run unprivileged, as root could set anything).
#include "daemon/ingest/ingest_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "daemon/core/counters.h"
#include "daemon/core/rate_limited_log.h"
#include "daemon/core/session_manager.h"
#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"
#include "trace/testing/unprivileged.h"

namespace tracetorch::daemon {
namespace {

using test_util::TempDir;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// A socket bound at `path` (never listening): what a crashed daemon leaves behind. -1 on error.
int BindAt(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A group this process is not in: chown to it needs privileges it does not have.
gid_t AGroupWeAreNotIn() {
  std::vector<gid_t> mine(static_cast<size_t>(getgroups(0, nullptr)) + 1);
  mine.resize(static_cast<size_t>(getgroups(static_cast<int>(mine.size()), mine.data())));
  mine.push_back(getegid());
  gid_t g = 1;
  while (std::find(mine.begin(), mine.end(), g) != mine.end()) ++g;
  return g;
}

class IngestServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = SessionManager::Create({}, &counters_);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  absl::StatusOr<std::unique_ptr<IngestServer>> Start(const std::string& path,
                                                      std::optional<gid_t> group = {}) {
    IngestServerOptions o;
    o.socket_path = path;
    o.socket_group = group;
    return IngestServer::Start(o, manager_.get(), &counters_, &log_);
  }

  TempDir dir_{"ttingest"};
  DaemonCounters counters_;
  RateLimitedLog log_;
  std::unique_ptr<SessionManager> manager_;
};

TEST_F(IngestServerTest, TheSocketIs0660ItsNewDirectory0750AndShutdownRemovesIt) {
  const std::string path = dir_.path() + "/run/tracetorch/d.sock";
  auto server = Start(path);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(ModeOf(path), 0660u);
  EXPECT_EQ(ModeOf(dir_.path() + "/run/tracetorch"), 0750u);
  // A second daemon on the same path is refused while this one serves.
  const absl::Status again = ClaimSocketPath(path);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(again.message(), "already serving")) << again;
  (*server)->Shutdown();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(IngestServerTest, AStaleSocketIsReplacedAnythingElseIsRefused) {
  const std::string stale = dir_.path() + "/stale.sock";
  const int fd = BindAt(stale);
  ASSERT_GE(fd, 0);
  close(fd);  // Bound, never listening: nobody answers.
  EXPECT_TRUE(ClaimSocketPath(stale).ok());
  EXPECT_FALSE(std::filesystem::exists(stale));

  const std::string file = dir_.path() + "/file";
  { std::ofstream(file) << "x"; }
  const absl::Status s = ClaimSocketPath(file);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(std::filesystem::exists(file));
  EXPECT_EQ(ClaimSocketPath("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClaimSocketPath(std::string(200, 'x')).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(IngestServerTest, SetSocketAccessSetsTheModeAndGroup) {
  const std::string path = dir_.path() + "/s.sock";
  const int fd = BindAt(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(chmod(path.c_str(), 0777), 0);
  ASSERT_TRUE(SetSocketAccess(path, getegid()).ok());
  EXPECT_EQ(ModeOf(path), 0660u);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, getegid());
  close(fd);

  const std::string gone = dir_.path() + "/gone.sock";
  const absl::Status s = SetSocketAccess(gone, std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(s.message(), gone)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "mode 0660")) << s;
}

// A group the daemon may not give is an error before anyone can connect, and no socket is left
// behind. Root may give any group, so the check runs unprivileged.
TEST_F(IngestServerTest, AGroupItCannotGiveIsAStartupError) {
  ASSERT_EQ(chmod(dir_.path().c_str(), 0777), 0);  // The unprivileged child binds here.
  const std::string path = dir_.path() + "/d.sock";
  tracetorch::testing::ExpectAsUnprivileged([&] {
    const gid_t other = AGroupWeAreNotIn();
    const absl::Status direct = [&] {
      const int fd = BindAt(dir_.path() + "/direct.sock");
      if (fd < 0) return absl::InternalError("bind");
      absl::Status s = SetSocketAccess(dir_.path() + "/direct.sock", other);
      close(fd);
      return s;
    }();
    auto server = Start(path, other);
    return direct.code() == absl::StatusCode::kPermissionDenied &&
           absl::StrContains(direct.message(), "direct.sock") &&
           absl::StrContains(direct.message(), "give group") && !server.ok() &&
           server.status().code() == absl::StatusCode::kPermissionDenied &&
           absl::StrContains(server.status().message(), path) && !std::filesystem::exists(path);
  });
  ASSERT_EQ(chmod(dir_.path().c_str(), 0700), 0);
}

}  // namespace
}  // namespace tracetorch::daemon
