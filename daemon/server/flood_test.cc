// The real tracetorchd binary under floods from the agents' own uid: thousands of connections that
// send a Hello and nothing else leave no history (no snapshot file, no index entry), and a real
// session streamed before the flood stays listed and readable; hundreds of connections that never
// send a Hello, held open and reopened as the daemon closes them, never lock a real agent out. The
// daemon's CPU seconds for the flood and the agents' waits are printed (measured, never asserted
// beyond "well before the Hello deadline": speed belongs in bench/).
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/daemon_client.h"
#include "daemon/testing/daemon_process.h"
#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"
#include "protocol/events.h"
#include "protocol/wire.h"
#include "service_client/service_client.h"

namespace tracetorch::daemon {
namespace {

using test_util::DaemonProcess;
using test_util::TempDir;
using test_util::WaitFor;

// Connects, sends one Hello, waits for the daemon's answer (or EOF), closes. Whether it got one.
bool HelloOnly(const std::string& socket_path, const std::string& hello) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  bool answered = false;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 &&
      write(fd, hello.data(), hello.size()) == static_cast<ssize_t>(hello.size())) {
    char buf[256];
    answered = read(fd, buf, sizeof(buf)) > 0;
  }
  close(fd);
  return answered;
}

TEST(HelloFlood, LeavesNoHistoryAndTheRealSessionStaysListed) {
  TempDir dir("ttflood");
  DaemonProcess daemon(TRACETORCHD_BINARY, dir.path(),
                       {"--snapshot-interval", "0.2", "--index-interval", "0.2", "--log-level",
                        "warn", "--max-sessions-in-memory", "64"});

  // One real session first.
  client::DaemonClientOptions o;
  o.address = absl::StrCat("unix://", daemon.socket_path());
  o.identity = protocol::CurrentProcessIdentity();
  o.identity.model_name = "Real";
  auto c = client::DaemonClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->DeclareLayers({{0, {"fc", "Linear", "fc", 1, 10}}});
  for (uint64_t step = 0; step < 10; ++step) {
    ForwardSample f;
    f.latency_ms = 1.0;
    (*c)->EnqueueForward(protocol::ToForwardEvent(0, step, f));
  }
  ASSERT_TRUE((*c)->Close(absl::Seconds(10)).ok()) << (*c)->stats().last_error;
  const std::string real = (*c)->session_id();

  protocol::ProcessIdentity identity = protocol::CurrentProcessIdentity();
  identity.model_name = "Flood";
  protocol::wire::HelloFields fields;
  fields.identity = &identity;
  std::string hello;
  protocol::wire::AppendHelloFrame(fields, &hello);

  constexpr int kFlood = 3000;
  const double cpu_before = daemon.CpuSeconds();
  int answered = 0;
  for (int i = 0; i < kFlood; ++i) answered += HelloOnly(daemon.socket_path(), hello) ? 1 : 0;
  const double cpu = daemon.CpuSeconds() - cpu_before;
  EXPECT_EQ(answered, kFlood);
  std::printf("Hello flood: %d connections cost tracetorchd %.2f CPU seconds (%.0f us each)\n",
              kFlood, cpu, 1e6 * cpu / kFlood);

  auto service =
      service_client::TraceServiceClient::Create(absl::StrCat("unix://", daemon.service_path()));
  ASSERT_TRUE(service.ok()) << service.status();
  auto list = (*service)->ListSessions();
  ASSERT_TRUE(list.ok()) << list.status();
  bool listed = false;
  for (const auto& s : list->sessions()) listed |= s.session_id() == real;
  EXPECT_TRUE(listed) << "the flood pushed the real session out of the list";
  EXPECT_LE(list->sessions_size(), 65);  // Empty sessions are evicted first, entirely.
  auto snap = (*service)->GetSnapshot(real);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->session().events(), 10u);
  service->reset();
  ASSERT_EQ(daemon.Stop(), 0);

  // On disk: the real session's snapshot, nothing of the flood.
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(daemon.data_dir() + "/sessions")) {
    files.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(files, std::vector<std::string>{real + ".json"});
}

// A connection that never says anything; -1 when it cannot connect.
int Idle(const std::string& socket_path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Keeps `n` idle connections open from its own thread: every one the daemon answers (a refusal,
// or being closed to make room) is closed and replaced, up to 8 every 10 ms (so that the churn
// does not take the test machine's every core).
class IdleFlood {
 public:
  IdleFlood(std::string socket_path, size_t n) : path_(std::move(socket_path)) {
    for (size_t i = 0; i < n; ++i) fds_.push_back(Idle(path_));
    thread_ = std::thread([this] {
      std::vector<pollfd> p;
      while (!stop_.load()) {
        p.clear();
        for (int fd : fds_) p.push_back({fd, POLLIN, 0});
        if (poll(p.data(), p.size(), 20) <= 0) continue;
        int round = 0;
        for (size_t i = 0; i < p.size() && round < 8; ++i) {
          if (p[i].revents == 0) continue;
          close(fds_[i]);
          fds_[i] = Idle(path_);
          reopened_.fetch_add(1);
          ++round;
        }
        absl::SleepFor(absl::Milliseconds(10));
      }
    });
  }
  ~IdleFlood() {
    stop_.store(true);
    thread_.join();
    for (int fd : fds_) close(fd);
  }
  uint64_t reopened() const { return reopened_.load(); }

 private:
  const std::string path_;
  std::vector<int> fds_;  // The flood thread's once started.
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> reopened_{0};
  std::thread thread_;
};

// 512 connections from the agents' own uid that never send a Hello, twice that uid's share of the
// slots (128 of --max-connections 512), kept open: each real agent started during the flood gets a
// session at once, by taking the slot of the oldest idle connection. Before, the uid's agents were
// refused until the idle ones reached --hello-timeout (60 s here; 10 s by default, ~40 s for a
// flood of 512 reconnecting).
TEST(HelloFlood, IdleConnectionsOfTheAgentsUidNeverLockItsAgentsOut) {
  TempDir dir("ttidle");
  DaemonProcess daemon(TRACETORCHD_BINARY, dir.path(),
                       {"--hello-timeout", "60", "--log-level", "error"});
  auto service =
      service_client::TraceServiceClient::Create(absl::StrCat("unix://", daemon.service_path()));
  ASSERT_TRUE(service.ok()) << service.status();
  ASSERT_TRUE(WaitFor([&] { return (*service)->GetStats().ok(); }, absl::Seconds(30)));

  IdleFlood flood(daemon.socket_path(), 512);
  ASSERT_TRUE(WaitFor([&] {
    auto s = (*service)->GetStats();
    return s.ok() && s->connections() >= 128;
  }));
  std::vector<double> waits_ms;
  for (int i = 0; i < 5; ++i) {
    client::DaemonClientOptions o;
    o.address = absl::StrCat("unix://", daemon.socket_path());
    o.identity = protocol::CurrentProcessIdentity();
    o.identity.model_name = absl::StrCat("Agent", i);
    const absl::Time start = absl::Now();
    auto c = client::DaemonClient::Create(o);
    ASSERT_TRUE(c.ok()) << c.status();
    const absl::Status connected = (*c)->WaitUntilConnected(absl::Seconds(20));
    ASSERT_TRUE(connected.ok()) << "agent " << i
                                << " locked out by idle connections: " << connected;
    waits_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    (*c)->DeclareLayers({{0, {"fc", "Linear", "fc", 1, 10}}});
    ForwardSample f;
    f.latency_ms = 1.0;
    (*c)->EnqueueForward(protocol::ToForwardEvent(0, 0, f));
    ASSERT_TRUE((*c)->Close(absl::Seconds(10)).ok()) << (*c)->stats().last_error;
  }
  std::sort(waits_ms.begin(), waits_ms.end());
  std::printf(
      "idle flood of 512: 5 agents connected in %.1f ms median, %.1f ms max; %llu idle "
      "connections reopened\n",
      waits_ms[2], waits_ms[4], static_cast<unsigned long long>(flood.reopened()));
  auto stats = (*service)->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_GE(stats->connections_evicted(), 384u);  // At least the flood beyond the share.
  EXPECT_EQ(stats->live_sessions(), 0u);
  EXPECT_GE(stats->sessions_total(), 5u);
}

}  // namespace
}  // namespace tracetorch::daemon
