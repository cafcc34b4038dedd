#include "daemon/core/flight_monitor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/forensics.h"
#include "spdlog/spdlog.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {

struct FlightMonitor::Watched {
  std::weak_ptr<Session> session;
  std::string id;
  int32_t pid = -1;
  int32_t uid = -1;
  bool python = false;
  std::shared_ptr<FlightRegion> region;
  std::shared_ptr<ProcessProbe> probe;
  absl::flat_hash_map<int32_t, std::string> names;  // The region's, refreshed for new ids.
  bool seen = false;                                // The position was read at least once...
  uint64_t events = 0;                              // ...and its event count then.
  FlightStatus status;
  bool nan_bundled = false;
  absl::Time ended_at = absl::InfinitePast();  // When first seen ended.
};

FlightMonitor::FlightMonitor(FlightMonitorOptions options, StackCapturer* stacks, Clock clock)
    : options_(std::move(options)), stacks_(stacks), clock_(std::move(clock)) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

FlightMonitor::~FlightMonitor() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void FlightMonitor::Watch(std::shared_ptr<Session> session, Target target) {
  auto w = std::make_shared<Watched>();
  w->session = session;
  w->id = session->id();
  w->pid = target.pid;
  w->uid = target.uid;
  w->python = !session->Info().identity.python_version.empty();
  w->region = std::move(target.region);
  w->probe = std::move(target.probe);
  w->status = session->flight();  // A resume keeps its stall count and bundles.
  w->status.recorder = w->region != nullptr;
  w->status.stalled = false;
  w->status.exit.reset();
  w->nan_bundled = w->status.bundles > 0 && session->nan_found().has_value();
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = watched_.try_emplace(w->id, w);
    if (!inserted) {
      w->nan_bundled = w->nan_bundled || it->second->nan_bundled;
      it->second = w;
    }
    // A session seen again is followed again: it is no longer among the ended ones.
    ended_.erase(std::remove(ended_.begin(), ended_.end(), w->id), ended_.end());
  }
  session->SetFlight(w->status);
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
}

void FlightMonitor::Poll() {
  absl::MutexLock round(&poll_mu_);
  const absl::Time now = clock_();
  std::vector<std::shared_ptr<Watched>> all;
  {
    absl::MutexLock lock(&mu_);
    all.reserve(watched_.size());
    for (const auto& [id, w] : watched_) all.push_back(w);
  }
  std::vector<std::shared_ptr<Watched>> done;
  for (const std::shared_ptr<Watched>& w : all) {
    if (PollOne(*w, now)) done.push_back(w);
  }
  absl::MutexLock lock(&mu_);
  for (const std::shared_ptr<Watched>& w : done) {
    auto it = watched_.find(w->id);
    if (it == watched_.end() || it->second != w) continue;  // Followed anew meanwhile.
    watched_.erase(it);
    if (!options_.data_dir.empty()) {
      bundles_.erase(w->id);
    } else if (bundles_.contains(w->id)) {
      ended_.push_back(w->id);
      while (ended_.size() > kMemoryOnlySessions) {
        bundles_.erase(ended_.front());
        ended_.pop_front();
      }
    }
  }
  stats_.watched = watched_.size();
  stats_.recorders = 0;
  stats_.stalled = 0;
  for (const auto& [id, w] : watched_) {
    stats_.recorders += w->region != nullptr ? 1 : 0;
  }
  for (const std::shared_ptr<Watched>& w : all) stats_.stalled += w->status.stalled ? 1 : 0;
}

bool FlightMonitor::PollOne(Watched& w, absl::Time now) {
  std::shared_ptr<Session> session = w.session.lock();
  if (session == nullptr) return true;
  FlightStatus& f = w.status;
  const bool was_stalled = f.stalled;
  const SessionState state = session->state();
  const bool exited = w.probe != nullptr && w.probe->Exited();
  if (exited && !f.exit.has_value()) f.exit = w.probe->Exit();

  bool stalled_now = false;
  if (w.region != nullptr) {
    absl::StatusOr<flight::PositionView> pos = w.region->Position();
    if (pos.ok()) {
      if (!w.seen || pos->events != w.events) {
        w.seen = true;
        w.events = pos->events;
        f.moved = now;
        f.stalled = false;  // Moved: live again.
      }
      if (pos->layer >= 0 && !w.names.contains(pos->layer)) w.names = w.region->Names();
      f.position = flight::Describe(*pos, w.names);
      if (pos->since_ns > 0) f.since = absl::FromUnixNanos(pos->ToUnixNs(pos->since_ns));
      f.step = pos->step;
      f.phase = flight::PhaseName(pos->phase);
      auto name = w.names.find(pos->layer);
      f.layer = pos->layer >= 0 && name != w.names.end() ? name->second : "";
      f.median_step = flight::MedianStepTime(*pos);
      f.stall_threshold = flight::StallThreshold(options_.stall_rule, f.median_step);
      if (state == SessionState::kLive && !f.stalled && !exited && pos->recording &&
          pos->phase != flight::Phase::kIdle && now - f.moved >= f.stall_threshold) {
        f.stalled = true;
        f.stalled_since = now;
        ++f.stalls;
        stalled_now = true;
      }
    }
  }
  if (state != SessionState::kLive) {
    f.stalled = false;
    if (w.ended_at == absl::InfinitePast()) w.ended_at = now;
  }
  if (f.stalled != was_stalled || stalled_now) {
    // The daemon's counts change with the session's state, not after this round's stacks (a
    // viewer that sees the session stalled sees it counted).
    absl::MutexLock lock(&mu_);
    if (f.stalled && !was_stalled) ++stats_.stalled;
    if (!f.stalled && was_stalled && stats_.stalled > 0) --stats_.stalled;
    if (stalled_now) ++stats_.stalls_total;
  }
  session->SetFlight(f);

  if (stalled_now) {
    spdlog::warn("session {} stalled: {} (not moved for {})", w.id, f.position,
                 absl::FormatDuration(f.stall_threshold));
    std::vector<ThreadStacksResult> stacks;
    if (stacks_ != nullptr) {
      stacks = stacks_->Capture(StackTarget{.pid = w.pid, .uid = w.uid, .python = w.python});
    }
    AddBundle(w, *session, "stalled", std::move(stacks));
  }
  if (!w.nan_bundled && session->nan_found().has_value()) {
    w.nan_bundled = true;
    AddBundle(w, *session, "nan", {});
  }
  switch (state) {
    case SessionState::kLive:
      return false;
    case SessionState::kFinished:
      return true;
    case SessionState::kAborted:
      break;
  }
  if (!exited && w.probe != nullptr && now - w.ended_at < options_.exit_grace) return false;
  if (!f.exit.has_value()) {
    f.exit =
        ProcessExit{.known = false,
                    .description = w.probe == nullptr
                                       ? "unknown (the daemon could not follow the process)"
                                       : "still running (its connection to the daemon was lost)"};
    session->SetFlight(f);
  }
  AddBundle(w, *session, "aborted", {});
  return true;
}

void FlightMonitor::AddBundle(Watched& w, Session& session, std::string reason,
                              std::vector<ThreadStacksResult> stacks) {
  {
    absl::MutexLock lock(&mu_);
    auto it = bundles_.find(w.id);
    if (it != bundles_.end() && it->second.size() >= options_.max_bundles_per_session) return;
  }
  for (const ThreadStacksResult& t : stacks) {
    if (t.error.empty()) {
      absl::MutexLock lock(&mu_);
      ++stats_.stacks_taken;
    }
  }
  ++w.status.bundles;
  session.SetFlight(w.status);
  std::optional<flight::RegionView> region;
  if (w.region != nullptr) {
    if (absl::StatusOr<flight::RegionView> r = w.region->Read(); r.ok()) region = *std::move(r);
  }
  BundleInputs in;
  in.reason = std::move(reason);
  in.written = clock_();
  in.session = &session;
  in.region = region.has_value() ? &*region : nullptr;
  in.stacks = std::move(stacks);
  in.history_layers = options_.history_layers;
  std::string bytes = BuildBundle(in);
  std::vector<std::string> all;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::string>& kept = bundles_[w.id];
    if (kept.empty() && !options_.data_dir.empty()) {
      // Bundles an earlier daemon wrote come first (the file is rewritten whole).
      if (absl::StatusOr<std::vector<std::string>> old =
              ReadBundles(BundlePath(options_.data_dir, w.id));
          old.ok()) {
        kept = *std::move(old);
      }
    }
    kept.push_back(std::move(bytes));
    ++stats_.bundles_total;
    if (!options_.data_dir.empty()) all = kept;
  }
  spdlog::info("session {}: forensic bundle \"{}\" ({})", w.id, in.reason, w.status.position);
  if (options_.data_dir.empty()) return;
  if (absl::Status s = WriteBundles(BundlePath(options_.data_dir, w.id), w.id, all); !s.ok()) {
    spdlog::warn("session {}: cannot write its forensic bundle: {}", w.id,
                 std::string(s.message()));
    absl::MutexLock lock(&mu_);
    ++stats_.bundle_errors;
  }
}

absl::StatusOr<std::vector<std::string>> FlightMonitor::Bundles(std::string_view session_id,
                                                                bool now) {
  std::vector<std::string> out;
  std::shared_ptr<Watched> live;
  bool in_memory = false;
  {
    absl::MutexLock lock(&mu_);
    const std::string id(session_id);
    if (auto it = bundles_.find(id); it != bundles_.end()) {
      out = it->second;
      in_memory = true;
    }
    if (auto it = watched_.find(id); it != watched_.end()) live = it->second;
  }
  if (!in_memory && !options_.data_dir.empty()) {
    absl::StatusOr<std::vector<std::string>> file =
        ReadBundles(BundlePath(options_.data_dir, std::string(session_id)));
    if (file.ok()) {
      out = *std::move(file);
    } else if (!absl::IsNotFound(file.status())) {
      return absl::InternalError(std::string(file.status().message()));
    }
  }
  if (now && live != nullptr && live->region != nullptr) {
    std::shared_ptr<Session> session = live->session.lock();
    absl::StatusOr<flight::RegionView> region = live->region->Read();
    if (session != nullptr && region.ok()) {
      BundleInputs in;
      in.reason = "now";
      in.written = clock_();
      in.session = session.get();
      in.region = &*region;
      in.history_layers = options_.history_layers;
      out.push_back(BuildBundle(in));
    }
  }
  return out;
}

FlightMonitorStats FlightMonitor::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void FlightMonitor::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Run(); });
}

void FlightMonitor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
}

void FlightMonitor::Run() {
  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::shared_ptr<ProcessProbe>> probes;  // Keeps the pidfds open while polled.
    fds.push_back({wake_fd_, POLLIN, 0});
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      for (const auto& [id, w] : watched_) {
        // An exited process's pidfd stays readable: it has been read (its exit), so it is not
        // polled again, else the loop would spin until the session is forgotten.
        if (w->probe == nullptr || w->status.exit.has_value()) continue;
        probes.push_back(w->probe);
        fds.push_back({w->probe->fd(), POLLIN, 0});
      }
    }
    const int timeout =
        static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(options_.poll_interval)));
    const int ready = poll(fds.data(), fds.size(), timeout);
    if (ready > 0 && (fds[0].revents & POLLIN) != 0) {
      uint64_t drained;
      (void)!read(wake_fd_, &drained, sizeof(drained));
    }
    try {
      Poll();
    } catch (const std::exception& e) {
      spdlog::error("flight monitor: {}", e.what());
    }
  }
}

}  // namespace tracetorch::daemon
