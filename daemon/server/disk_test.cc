// The real tracetorchd binary with its data directory on a small tmpfs that fills up, turns
// read-only, or loses its files while agents stream and viewers read (daemon/core/
// session_manager.h, "A data directory that fills up"):
//   - agents and viewers are served from memory throughout; an ended session whose final
//     snapshot could not be written stays readable (never evicted) whatever the memory limit;
//   - every failed snapshot, index and baseline write is counted in GetStats and /metrics, and
//     logged once per cause;
//   - nothing not on disk is acknowledged as durable: the agent's durable point never passes what
//     the snapshot file holds, and an agent that ends while the disk is full hears so (Close
//     fails, not_durable_events counts the tail);
//   - the snapshot written before the disk filled stays whole (no torn or empty file, no
//     temporary left);
//   - when space returns (or the folder comes back writable, or a removed folder or file is
//     noticed) the daemon catches up by itself: every session durable, its agent told so.
// Mounting a tmpfs needs root (CI runs as root); without it the tests skip, saying so.
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/daemon_client.h"
#include "daemon/core/data_dir.h"
#include "daemon/core/session.h"
#include "daemon/testing/daemon_process.h"
#include "daemon/testing/http_get.h"
#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"
#include "protocol/events.h"
#include "service_client/service_client.h"
#include "trace/atomic_file.h"
#include "trace/json.h"

namespace tracetorch::daemon {
namespace {

using test_util::DaemonProcess;
using test_util::TempDir;
using test_util::WaitFor;

// A tmpfs of `bytes` mounted at `path` (made), unmounted by the destructor.
class Tmpfs {
 public:
  Tmpfs(std::string path, size_t bytes) : path_(std::move(path)) {
    std::filesystem::create_directories(path_);
    const std::string options = absl::StrCat("size=", bytes, ",mode=0750");
    mounted_ = mount("tmpfs", path_.c_str(), "tmpfs", 0, options.c_str()) == 0;
    error_ = mounted_ ? 0 : errno;
  }
  ~Tmpfs() {
    if (mounted_) umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  std::string error() const { return std::strerror(error_); }
  // Makes `dir` (inside the tmpfs) read-only: a read-only bind mount over itself (a remount of
  // the whole tmpfs is refused while the daemon holds its lock file open for writing).
  bool ReadOnly(const std::string& dir) {
    return mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) == 0 &&
           mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0;
  }
  bool Writable(const std::string& dir) { return umount2(dir.c_str(), 0) == 0; }
  // Fills what is left with one file; its path.
  std::string Fill() {
    const std::string filler = path_ + "/filler";
    std::FILE* f = std::fopen(filler.c_str(), "w");
    std::vector<char> chunk(4096, 'x');
    if (f != nullptr) {
      while (std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size()) {
      }
      std::fclose(f);
    }
    return filler;
  }

 private:
  const std::string path_;
  bool mounted_ = false;
  int error_ = 0;
};

std::vector<protocol::LayerDecl> Layers() {
  return {{0, {"fc", "Linear", "net.fc", 2, 110}},
          {1, {"act", "ReLU", "net.act", 2, 0}},
          {2, {"net", "Net", "net", 1, 0}}};
}

// An agent streaming one step (six events) every few milliseconds from its own thread.
class Agent {
 public:
  Agent(const std::string& socket, const std::string& model) {
    client::DaemonClientOptions o;
    o.address = absl::StrCat("unix://", socket);
    o.identity = protocol::CurrentProcessIdentity();
    o.identity.model_name = model;
    auto c = client::DaemonClient::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
    client_->DeclareLayers(Layers());
    thread_ = std::thread([this] {
      for (uint64_t step = 0; !stop_.load(); ++step) {
        for (uint32_t layer = 0; layer < 3; ++layer) {
          ForwardSample f;
          f.latency_ms = 0.5 + layer;
          client_->EnqueueForward(protocol::ToForwardEvent(layer, step, f));
          BackwardSample b;
          b.grad_norm = 1.0;
          client_->EnqueueBackward({layer, step, b});
        }
        produced_.fetch_add(6);
        absl::SleepFor(absl::Milliseconds(5));
      }
    });
  }
  ~Agent() { StopProducing(); }
  void StopProducing() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  client::DaemonClient& client() { return *client_; }
  uint64_t produced() const { return produced_.load(); }

 private:
  std::unique_ptr<client::DaemonClient> client_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> produced_{0};
  std::thread thread_;
};

// The stream position (events + rejected + lost) a snapshot file's accounting holds; nullopt when
// the file does not read as a whole snapshot.
std::optional<uint64_t> FilePosition(const std::string& path) {
  absl::StatusOr<TraceRecord> record = ReadTraceFile(path);
  if (!record.ok()) return std::nullopt;
  std::optional<protocol::SessionIndexEntry> a = TakeSnapshotAccounting(&*record);
  if (!a.has_value()) return std::nullopt;
  return a->info.events + a->info.rejected_events + a->lost_events;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int CountLines(const std::string& text, absl::string_view needle) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) n += absl::StrContains(line, needle);
  return n;
}

// The /metrics port the daemon logged at info level; 0 until it did.
int MetricsPort(const std::string& log) {
  const std::string marker = "Prometheus metrics on http://127.0.0.1:";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return 0;
  int port = 0;
  const std::string rest = log.substr(at + marker.size());
  (void)absl::SimpleAtoi(rest.substr(0, rest.find('/')), &port);
  return port;
}

// The value of an unlabelled series in a /metrics page; -1 when absent.
double Series(const std::string& page, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (absl::StartsWith(line, absl::StrCat(name, " "))) {
      double v = -1;
      (void)absl::SimpleAtod(line.substr(name.size() + 1), &v);
      return v;
    }
  }
  return -1;
}

class DiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "mounting a tmpfs for the data directory needs root (CI runs as root); uid "
                   << geteuid();
    }
    tmpfs_ = std::make_unique<Tmpfs>(dir_.path() + "/data", 256 << 10);
    ASSERT_TRUE(tmpfs_->mounted()) << "mount tmpfs: " << tmpfs_->error();
    daemon_ = std::make_unique<DaemonProcess>(
        TRACETORCHD_BINARY, dir_.path(),
        std::vector<std::string>{"--snapshot-interval", "0.2", "--index-interval", "0.2",
                                 "--max-sessions-in-memory", "1", "--metrics-listen", "127.0.0.1:0",
                                 "--log-level", "info"});
    auto s = service_client::TraceServiceClient::Create(
        absl::StrCat("unix://", daemon_->service_path()));
    ASSERT_TRUE(s.ok()) << s.status();
    service_ = *std::move(s);
    ASSERT_TRUE(WaitFor([&] { return service_->GetStats().ok(); }, absl::Seconds(30)));
  }
  void TearDown() override {
    service_.reset();
    if (daemon_ != nullptr) daemon_->Kill();
  }

  v1::DaemonStats Stats() {
    absl::StatusOr<v1::DaemonStats> s = service_->GetStats();
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::DaemonStats();
  }
  std::string Log() const { return ReadAll(dir_.path() + "/daemon.log"); }
  std::string SnapshotPath(const std::string& id) const {
    return daemon_->data_dir() + "/sessions/" + id + ".json";
  }
  // No temporary file left behind (a write cut short) anywhere in the data directory. A write in
  // progress (the daemon keeps writing) has one for a moment; one that stays is the failure.
  void ExpectNoTemporaries() {
    std::vector<std::string> left;
    const bool none = WaitFor(
        [&] {
          left.clear();
          std::error_code ec;
          for (std::filesystem::recursive_directory_iterator it(daemon_->data_dir(), ec), end;
               !ec && it != end; it.increment(ec)) {
            if (IsAtomicWriteTemp(it->path().filename().string())) left.push_back(it->path());
          }
          return left.empty();
        },
        absl::Seconds(5));
    EXPECT_TRUE(none) << absl::StrJoin(left, ", ");
  }

  TempDir dir_{"ttdisk"};
  std::unique_ptr<Tmpfs> tmpfs_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<service_client::TraceServiceClient> service_;
};

TEST_F(DiskTest, AFullDiskIsServedFromMemoryCountedAndCaughtUpWhenSpaceReturns) {
  Agent a(daemon_->socket_path(), "Long");
  ASSERT_TRUE(a.client().WaitUntilConnected(absl::Seconds(30)).ok());
  const std::string id = a.client().session_id();
  // A good snapshot on disk, acknowledged.
  ASSERT_TRUE(WaitFor([&] { return a.client().stats().durable_events > 0; }, absl::Seconds(30)));
  const std::optional<uint64_t> before = FilePosition(SnapshotPath(id));
  ASSERT_TRUE(before.has_value());

  const std::string filler = tmpfs_->Fill();
  ASSERT_TRUE(WaitFor([&] { return Stats().snapshot_errors() >= 3; }, absl::Seconds(60))) << Log();
  // Nothing is acknowledged beyond what the file holds, and the file is whole.
  const std::optional<uint64_t> frozen = FilePosition(SnapshotPath(id));
  ASSERT_TRUE(frozen.has_value()) << "the snapshot written before the disk filled is gone or torn";
  EXPECT_GE(*frozen, *before);
  EXPECT_LE(a.client().stats().durable_events, *frozen);
  EXPECT_EQ(Stats().sessions_not_durable(), 1u);
  // Viewers read from memory: more events than on disk.
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Snapshot> snap = service_->GetSnapshot(id);
    return snap.ok() && snap->session().events() > *frozen + 60;
  }));
  EXPECT_LE(a.client().stats().durable_events, *frozen);

  // An agent ends while the disk is full: its tail is not durable, and it hears so. Its session
  // stays in memory (--max-sessions-in-memory 1 would evict an ended session) and readable.
  std::string ended_id;
  {
    Agent b(daemon_->socket_path(), "Short");
    ASSERT_TRUE(b.client().WaitUntilConnected(absl::Seconds(30)).ok());
    ended_id = b.client().session_id();
    ASSERT_TRUE(WaitFor([&] { return b.produced() >= 60; }));
    b.StopProducing();
    const absl::Status closed = b.client().Close(absl::Seconds(1));
    EXPECT_EQ(closed.code(), absl::StatusCode::kDeadlineExceeded) << closed;
    EXPECT_EQ(b.client().stats().not_durable_events, b.client().stats().sent_events);
    EXPECT_EQ(b.client().stats().durable_events, 0u);
  }
  absl::StatusOr<v1::Snapshot> ended = service_->GetSnapshot(ended_id);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->session().state(), v1::SESSION_STATE_FINISHED);
  EXPECT_FALSE(std::filesystem::exists(SnapshotPath(ended_id)));

  // A baseline cannot be written either: refused, counted.
  v1::DiffOperand source;
  source.mutable_session()->set_session_id(id);
  EXPECT_FALSE(service_->SetBaseline("before-full", source).ok());

  const v1::DaemonStats full = Stats();
  EXPECT_GE(full.snapshot_errors(), 3u);
  EXPECT_GE(full.index_errors(), 1u);
  EXPECT_EQ(full.baseline_errors(), 1u);
  EXPECT_EQ(full.sessions_not_durable(), 2u);
  const int port = MetricsPort(Log());
  ASSERT_GT(port, 0) << Log();
  const std::string page = test_util::HttpGet(port, "/metrics");
  EXPECT_GE(Series(page, "tracetorchd_snapshot_errors_total"), 3) << page;
  EXPECT_GE(Series(page, "tracetorchd_index_errors_total"), 1) << page;
  EXPECT_EQ(Series(page, "tracetorchd_baseline_errors_total"), 1) << page;
  EXPECT_EQ(Series(page, "tracetorchd_sessions_not_durable"), 2) << page;
  // One log line per cause, however many failures.
  const std::string log = Log();
  EXPECT_EQ(CountLines(log, "snapshot write failed"), 1) << log;
  EXPECT_EQ(CountLines(log, "index write failed"), 1) << log;
  ExpectNoTemporaries();

  // Space returns: everything is caught up without help, the agent told.
  std::filesystem::remove(filler);
  ASSERT_TRUE(WaitFor([&] { return Stats().sessions_not_durable() == 0; }, absl::Seconds(60)))
      << Log();
  a.StopProducing();
  ASSERT_TRUE(a.client().Flush(absl::Seconds(10)).ok());
  ASSERT_TRUE(
      WaitFor([&] { return a.client().stats().durable_events == a.produced(); }, absl::Seconds(60)))
      << a.client().stats().durable_events << " of " << a.produced();
  EXPECT_EQ(FilePosition(SnapshotPath(id)), a.produced());
  EXPECT_TRUE(FilePosition(SnapshotPath(ended_id)).has_value());
  EXPECT_TRUE(service_->SetBaseline("after-full", source).ok());
  EXPECT_EQ(CountLines(Log(), "snapshot writes work again"), 1) << Log();
  ASSERT_TRUE(a.client().Close(absl::Seconds(5)).ok());
  EXPECT_EQ(a.client().stats().not_durable_events, 0u);
  ExpectNoTemporaries();
}

TEST_F(DiskTest, AReadOnlyDataDirectoryIsSurvivedAndCaughtUp) {
  Agent a(daemon_->socket_path(), "Net");
  ASSERT_TRUE(a.client().WaitUntilConnected(absl::Seconds(30)).ok());
  const std::string id = a.client().session_id();
  ASSERT_TRUE(WaitFor([&] { return a.client().stats().durable_events > 0; }, absl::Seconds(30)));
  const std::string sessions = daemon_->data_dir() + "/sessions";
  ASSERT_TRUE(tmpfs_->ReadOnly(sessions)) << std::strerror(errno);
  ASSERT_TRUE(WaitFor([&] { return Stats().snapshot_errors() >= 2; }, absl::Seconds(60))) << Log();
  const std::optional<uint64_t> frozen = FilePosition(SnapshotPath(id));
  ASSERT_TRUE(frozen.has_value());
  EXPECT_LE(a.client().stats().durable_events, *frozen);
  const std::string log = Log();
  EXPECT_EQ(CountLines(log, "snapshot write failed"), 1) << log;
  EXPECT_TRUE(absl::StrContains(log, "Read-only file system")) << log;
  EXPECT_EQ(Stats().sessions_not_durable(), 1u);
  ASSERT_TRUE(tmpfs_->Writable(sessions)) << std::strerror(errno);
  a.StopProducing();
  ASSERT_TRUE(a.client().Flush(absl::Seconds(10)).ok());
  ASSERT_TRUE(
      WaitFor([&] { return a.client().stats().durable_events == a.produced(); }, absl::Seconds(60)))
      << Log();
  EXPECT_EQ(Stats().sessions_not_durable(), 0u);
  ASSERT_TRUE(a.client().Close(absl::Seconds(5)).ok());
}

// The sessions folder and the index removed under the running daemon (a clean-up job): both are
// made again, and the session's snapshot written again though nothing changed in it.
TEST_F(DiskTest, FilesRemovedUnderTheDaemonAreWrittenAgain) {
  std::string id;
  uint64_t produced = 0;
  {
    Agent a(daemon_->socket_path(), "Net");
    ASSERT_TRUE(a.client().WaitUntilConnected(absl::Seconds(30)).ok());
    id = a.client().session_id();
    ASSERT_TRUE(WaitFor([&] { return a.produced() >= 60; }));
    a.StopProducing();
    produced = a.produced();
    ASSERT_TRUE(a.client().Close(absl::Seconds(5)).ok());
  }
  ASSERT_TRUE(
      WaitFor([&] { return std::filesystem::exists(daemon_->data_dir() + "/index.json"); }));
  // The finished session is in memory (the only one); its file goes, and comes back.
  std::filesystem::remove_all(daemon_->data_dir() + "/sessions");
  std::filesystem::remove(daemon_->data_dir() + "/index.json");
  ASSERT_TRUE(
      WaitFor([&] { return FilePosition(SnapshotPath(id)) == produced; }, absl::Seconds(30)))
      << Log();
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(daemon_->data_dir() + "/index.json"); },
                      absl::Seconds(30)));
  EXPECT_EQ(daemon_->Stop(), 0);
  daemon_.reset();
  // A restarted daemon lists it again, from the files made again.
  DaemonProcess again(TRACETORCHD_BINARY, dir_.path(), {"--log-level", "warn"});
  auto s =
      service_client::TraceServiceClient::Create(absl::StrCat("unix://", again.service_path()));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(WaitFor([&] { return (*s)->GetStats().ok(); }, absl::Seconds(30)));
  absl::StatusOr<v1::Snapshot> snap = (*s)->GetSnapshot(id);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->session().events(), produced);
  EXPECT_EQ(snap->session().state(), v1::SESSION_STATE_FINISHED);
}

}  // namespace
}  // namespace tracetorch::daemon
