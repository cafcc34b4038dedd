// The client library's CPU per event, stage by stage, on one agent: what the ingest benchmark's
// agents spend besides the daemon (bench/ingest_bench.cc prints the totals).
//
// A sink in this process plays the daemon: it answers the Hello with a Welcome, then reads and
// discards everything (its own thread; what it costs is the receiving half of the socket copy).
// The producer (this thread) streams the ingest benchmark's steps (bench/agent_driver.h: 50 layers,
// a forward with two [32, 256] tensors and stats, a backward per layer) into a DaemonClient, then
// flushes. Printed, in CPU nanoseconds per event:
//   build    MakeForward/MakeBackward alone (the benchmark's producer, not the library)
//   enqueue  build + EnqueueForward/EnqueueBackward on the producer's thread (thread CPU)
//   sender   the library's sender thread: the process's CPU less the producer's and the sink's
//   sink     read(2) of what the sender wrote
// and the events dropped (queue full: the sender fell behind the producer).
//
// Usage: client_bench [events, default 4000000]
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/agent_driver.h"
#include "client/daemon_client.h"

namespace {

using tracetorch::bench::MakeBackward;
using tracetorch::bench::MakeForward;

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

[[noreturn]] void Exit(const std::string& why) {
  std::fprintf(stderr, "%s\n", why.c_str());
  std::exit(1);
}

// Accepts one connection, sends a Welcome (DaemonMessage{welcome{session_id: "s"}}), then reads
// until the peer closes.
class Sink {
 public:
  explicit Sink(const std::string& path) {
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    if (bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listen_fd_, 1) != 0) {
      Exit(absl::StrCat("cannot listen on ", path));
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~Sink() {
    Join();
    close(listen_fd_);
  }
  // Waits for the peer to close; then cpu_seconds() is the reading's thread CPU.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  double cpu_seconds() const { return cpu_; }

 private:
  void Run() {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) Exit("accept failed");
    const char welcome[] = {5, 0, 0, 0, 0x0a, 3, 0x0a, 1, 's'};
    if (write(fd, welcome, sizeof(welcome)) != static_cast<ssize_t>(sizeof(welcome))) {
      Exit("cannot write the Welcome");
    }
    const double t0 = ThreadCpuSeconds();
    std::vector<char> buf(1 << 20);
    while (read(fd, buf.data(), buf.size()) > 0) {
    }
    cpu_ = ThreadCpuSeconds() - t0;
    close(fd);
  }

  int listen_fd_ = -1;
  std::thread thread_;
  double cpu_ = 0;  // Written by the thread before it ends.
};

}  // namespace

int main(int argc, char** argv) {
  const uint64_t events = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 4000000;
  constexpr int kLayers = 50;
  std::string dir = "/tmp/ttclient_XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) Exit("mkdtemp failed");
  const std::string path = dir + "/d.sock";

  // build alone.
  uint64_t sink_sum = 0;
  double t0 = ThreadCpuSeconds();
  uint64_t built = 0;
  for (uint64_t step = 0; built < events; ++step) {
    for (uint32_t l = 0; l < kLayers; ++l) sink_sum += MakeForward(l, step).inputs.size();
    for (uint32_t l = kLayers; l-- > 0;) sink_sum += MakeBackward(l, step).layer_id;
    built += 2 * kLayers;
  }
  const double build_ns = 1e9 * (ThreadCpuSeconds() - t0) / static_cast<double>(built);

  uint64_t produced = 0;
  double enqueue_ns = 0, sender_ns = 0, sink_ns = 0;
  tracetorch::client::DaemonClientStats stats;
  {
    Sink sink(path);
    tracetorch::client::DaemonClientOptions o;
    o.address = path;
    o.identity = tracetorch::protocol::CurrentProcessIdentity();
    o.identity.model_name = "client_bench";
    auto client = tracetorch::client::DaemonClient::Create(o);
    if (!client.ok()) Exit(std::string(client.status().message()));
    (*client)->DeclareLayers(tracetorch::bench::MakeLayers(0, kLayers));
    if (absl::Status s = (*client)->WaitUntilConnected(absl::Seconds(5)); !s.ok()) {
      Exit(std::string(s.message()));
    }
    const double p0 = ProcessCpuSeconds();
    t0 = ThreadCpuSeconds();
    for (uint64_t step = 0; produced < events; ++step) {
      for (uint32_t l = 0; l < kLayers; ++l) (*client)->EnqueueForward(MakeForward(l, step));
      for (uint32_t l = kLayers; l-- > 0;) (*client)->EnqueueBackward(MakeBackward(l, step));
      produced += 2 * kLayers;
    }
    const double producer = ThreadCpuSeconds() - t0;
    if (absl::Status s = (*client)->Flush(absl::Seconds(30)); !s.ok()) {
      Exit(std::string(s.message()));
    }
    const double process = ProcessCpuSeconds() - p0;
    stats = (*client)->stats();
    (void)(*client)->Close(absl::Seconds(5));
    client->reset();  // Closes the socket: the sink's read ends.
    sink.Join();
    const double sink_cpu = sink.cpu_seconds();
    const double per = 1e9 / static_cast<double>(produced);
    enqueue_ns = producer * per;
    sink_ns = sink_cpu * per;
    sender_ns = (process - producer - sink_cpu) * per;
  }
  std::filesystem::remove_all(dir);
  std::printf(
      "client library, 1 agent, %llu events: build %.0f ns/event, build + enqueue %.0f (enqueue "
      "%.0f), sender %.0f, sink %.0f; dropped %llu (%.1f%%), %llu batches, %.1f bytes/event "
      "[%llu]\n",
      static_cast<unsigned long long>(produced), build_ns, enqueue_ns, enqueue_ns - build_ns,
      sender_ns, sink_ns, static_cast<unsigned long long>(stats.dropped_events),
      100.0 * static_cast<double>(stats.dropped_events) / static_cast<double>(produced),
      static_cast<unsigned long long>(stats.batches_sent),
      static_cast<double>(stats.bytes_sent) / static_cast<double>(stats.sent_events),
      static_cast<unsigned long long>(sink_sum % 10));
  return 0;
}
