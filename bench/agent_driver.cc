#include "bench/agent_driver.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/daemon_client.h"

namespace tracetorch::bench {
namespace {

[[noreturn]] void Exit(const std::string& why) {
  std::fprintf(stderr, "%s\n", why.c_str());
  std::exit(1);
}

}  // namespace

protocol::ForwardEvent MakeForward(uint32_t layer, uint64_t step) {
  protocol::ForwardEvent e;
  e.layer_id = layer;
  e.step = step;
  e.latency_ms = 0.05 + 0.001 * layer;
  protocol::WireTensor t;
  t.shape = {32, 256};
  t.stats = TensorStats{0.01, 1.0, -3.5, 3.5, 0, 0};
  e.inputs.push_back(t);
  e.outputs.push_back(t);
  return e;
}

protocol::BackwardEvent MakeBackward(uint32_t layer, uint64_t step) {
  protocol::BackwardEvent e;
  e.layer_id = layer;
  e.step = step;
  e.sample.latency_ms = 0.1;
  e.sample.grad_norm = 0.5;
  e.sample.grad_mean = 0.001;
  return e;
}

std::vector<protocol::LayerDecl> MakeLayers(int agent, int layers) {
  std::vector<protocol::LayerDecl> out;
  for (int l = 0; l < layers; ++l) {
    out.push_back({static_cast<uint32_t>(l),
                   {absl::StrCat("l", l), "Linear", absl::StrCat("a", agent, ".l", l), 2, 1000}});
  }
  return out;
}

v1::DaemonStats StatsOrExit(service_client::TraceServiceClient& service) {
  absl::StatusOr<v1::DaemonStats> s = service.GetStats();
  if (!s.ok()) Exit(absl::StrCat("GetStats: ", s.status().message()));
  return *std::move(s);
}

DaemonProcess::DaemonProcess(const std::string& binary, const std::string& prefix,
                             std::vector<std::string> wrapper, absl::Duration start_timeout) {
  std::string tmpl = absl::StrCat("/tmp/", prefix, "_XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) Exit("mkdtemp failed");
  dir_ = tmpl;
  socket_ = dir_ + "/d.sock";
  rpc_ = dir_ + "/tracetorchd-rpc.sock";  // The default: beside the ingest socket.
  const std::string data = dir_ + "/data";
  std::vector<std::string> args = std::move(wrapper);
  for (const std::string& a : {binary, std::string("--socket"), socket_, std::string("--data-dir"),
                               data, std::string("--log-level"), std::string("warn")}) {
    args.push_back(a);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) Exit("fork failed");
  if (pid_ == 0) {
    execvp(argv[0], argv.data());
    _exit(127);
  }
  const absl::Time deadline = absl::Now() + start_timeout;
  while (!std::filesystem::exists(socket_)) {
    if (absl::Now() > deadline) Exit(absl::StrCat(binary, " did not create ", socket_));
    absl::SleepFor(absl::Milliseconds(10));
  }
}

DaemonProcess::~DaemonProcess() {
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

SyntheticAgents::SyntheticAgents(AgentOptions options) : options_(std::move(options)) {
  {
    absl::MutexLock lock(&mu_);
    sessions_.resize(static_cast<size_t>(options_.agents));
  }
  for (int a = 0; a < options_.agents; ++a) threads_.emplace_back([this, a] { Agent(a); });
}

SyntheticAgents::~SyntheticAgents() { Stop(); }

void SyntheticAgents::Agent(int index) {
  client::DaemonClientOptions o;
  o.address = options_.socket;
  o.identity = protocol::CurrentProcessIdentity();
  o.identity.model_name = absl::StrCat(options_.model_prefix, index);
  absl::StatusOr<std::unique_ptr<client::DaemonClient>> c = client::DaemonClient::Create(o);
  if (!c.ok()) Exit(absl::StrCat("agent ", index, ": ", c.status().message()));
  client::DaemonClient& agent = **c;
  agent.DeclareLayers(MakeLayers(index, options_.layers));
  if (absl::Status s = agent.WaitUntilConnected(absl::Seconds(5)); !s.ok()) {
    Exit(absl::StrCat("agent ", index, ": ", s.message()));
  }
  {
    absl::MutexLock lock(&mu_);
    sessions_[static_cast<size_t>(index)] = agent.session_id();
    ++connected_;
  }
  Totals local;
  auto count = [&](bool accepted) {
    ++local.produced;
    if (accepted) return;
    ++local.dropped;
    absl::SleepFor(absl::Microseconds(200));  // Leave the CPU to the sender and daemon.
  };
  const absl::Time start = absl::Now();
  for (uint64_t step = 0; !stop_.load(std::memory_order_relaxed); ++step) {
    if (options_.steps_per_s > 0) {  // Paced: one step every 1/steps_per_s.
      const absl::Time due =
          start + absl::Seconds(static_cast<double>(step) / options_.steps_per_s);
      if (const absl::Time now = absl::Now(); due > now) absl::SleepFor(due - now);
    }
    for (int l = 0; l < options_.layers; ++l) {
      count(agent.EnqueueForward(MakeForward(static_cast<uint32_t>(l), step)));
    }
    for (int l = options_.layers - 1; l >= 0; --l) {
      count(agent.EnqueueBackward(MakeBackward(static_cast<uint32_t>(l), step)));
    }
  }
  (void)agent.Close(options_.close_timeout);  // A benchmark reports drops, not close errors.
  absl::MutexLock lock(&mu_);
  totals_.produced += local.produced;
  totals_.dropped += local.dropped;
}

std::vector<std::string> SyntheticAgents::WaitConnected() {
  absl::MutexLock lock(&mu_);
  auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return connected_ == options_.agents; };
  mu_.Await(absl::Condition(&all));
  return sessions_;
}

SyntheticAgents::Totals SyntheticAgents::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  absl::MutexLock lock(&mu_);
  return totals_;
}

}  // namespace tracetorch::bench
