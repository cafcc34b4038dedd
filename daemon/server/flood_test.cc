// The real tracetorchd binary under a Hello flood: thousands of connections that send a Hello and
// nothing else. They leave no history (no snapshot file, no index entry), and a real session
// streamed before the flood stays listed and readable. The daemon's CPU seconds for the flood are
// printed (measured, never asserted: speed belongs in bench/).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
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

}  // namespace
}  // namespace tracetorch::daemon
