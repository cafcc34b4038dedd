#include "daemon/core/watch_hub.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tracetorch::daemon {
namespace {

int64_t UnixNanosOrZero(absl::Time t) {
  return t == absl::InfinitePast() ? 0 : absl::ToUnixNanos(t);
}

// A viewer's update whose payload (a Snapshot or JobSnapshot) may be shared with other viewers'
// updates: the message borrows it (protobuf's unsafe_arena_* calls on a heap message store and
// release the pointer without copying) and gives it back before it is destroyed. The hub thread
// serializes the payload once per pass (WatchWrite::shared); the sinks only read it.
struct Outgoing {
  v1::WatchUpdate update;
  std::shared_ptr<const v1::Snapshot> snapshot;  // Borrowed by update.full / update.delta.
  std::shared_ptr<const v1::JobSnapshot> job;    // Borrowed by update.job.

  Outgoing() = default;
  Outgoing(const Outgoing&) = delete;
  Outgoing& operator=(const Outgoing&) = delete;
  ~Outgoing() {
    switch (update.kind_case()) {
      case v1::WatchUpdate::kFull:
        if (snapshot != nullptr) update.unsafe_arena_release_full();
        break;
      case v1::WatchUpdate::kDelta:
        if (snapshot != nullptr) update.unsafe_arena_release_delta();
        break;
      case v1::WatchUpdate::kJob:
        if (job != nullptr) update.unsafe_arena_release_job();
        break;
      default:
        break;
    }
  }
};

std::shared_ptr<Outgoing> SnapshotUpdate(std::shared_ptr<const v1::Snapshot> payload, bool delta) {
  auto out = std::make_shared<Outgoing>();
  auto* borrowed = const_cast<v1::Snapshot*>(payload.get());
  if (delta) {
    out->update.unsafe_arena_set_allocated_delta(borrowed);
  } else {
    out->update.unsafe_arena_set_allocated_full(borrowed);
  }
  out->snapshot = std::move(payload);
  return out;
}

// A feed shared by its viewers (WatchHub::Shared in `feeds`): made by the first viewer (with
// the tick phase `phase` returns), dropped with the last. The reference is valid until `feeds`
// changes.
template <typename Map, typename Make, typename Phase>
auto& Attach(Map& feeds, const typename Map::key_type& key, Make make, Phase phase) {
  auto& shared = feeds[key];
  if (shared.feed == nullptr) {
    shared.feed = make();
    shared.phase = phase();
  }
  ++shared.viewers;
  return shared;
}

template <typename Map>
void Release(Map& feeds, const typename Map::key_type& key) {
  auto it = feeds.find(key);
  if (it != feeds.end() && --it->second.viewers == 0) feeds.erase(it);
}

}  // namespace

struct WatchHub::Mailbox {
  absl::Mutex mu;  // Taken before the hub's mu_ (Wake), never while holding it.
  WatchHub* hub ABSL_GUARDED_BY(mu) = nullptr;  // Null once the hub shut down: results dropped.
  std::vector<std::function<void()>> ready ABSL_GUARDED_BY(mu);
};

struct WatchHub::Viewer {
  Viewer(uint64_t id, absl::Duration interval, absl::Time now, absl::Duration phase)
      : id(id), machine(interval, now, phase) {}
  const uint64_t id;
  WatchViewer machine;
  // Exactly one of these while attached.
  std::shared_ptr<SessionFeed> feed;     // A session in memory.
  std::shared_ptr<JobFeed> job;          // A job.
  std::shared_ptr<EvictedFeed> evicted;  // A session no longer in memory.
  bool detached = false;                 // Closed: no longer counted on its feed.
};

// What one pass decided.
struct WatchHub::Pass {
  struct Action {
    uint64_t id = 0;
    WatchWrite write;                   // Send this, or
    std::optional<absl::Status> close;  // close with this.
    bool follow_up = false;             // Send: the viewer has more to say once it completes.
    WatchSink* sink = nullptr;
  };
  // `out` holds only its payload (or its kind) until this sets the viewer's own fields.
  void Send(uint64_t id, std::shared_ptr<Outgoing> out, uint64_t sequence, int64_t newest_event_ns,
            bool follow_up, absl::Time sent) {
    Action a;
    a.id = id;
    a.follow_up = follow_up;
    auto set_own_fields = [&](v1::WatchUpdate& u) {
      u.set_sequence(sequence);
      u.set_sent_unix_ns(absl::ToUnixNanos(sent));
      u.set_newest_event_unix_ns(newest_event_ns);
    };
    const void* payload = out->snapshot != nullptr ? static_cast<const void*>(out->snapshot.get())
                                                   : static_cast<const void*>(out->job.get());
    if (payload != nullptr) {
      // Serialized before the viewer's own fields are set: the payload alone.
      std::shared_ptr<const std::string>& wire = wires[{payload, out->update.kind_case()}];
      if (wire == nullptr) {
        wire = std::make_shared<const std::string>(out->update.SerializeAsString());
      }
      a.write.shared = wire;
      v1::WatchUpdate own;
      set_own_fields(own);
      a.write.own = own.SerializeAsString();
      set_own_fields(out->update);
    } else {
      set_own_fields(out->update);
      a.write.own = out->update.SerializeAsString();
    }
    a.write.update = std::shared_ptr<const v1::WatchUpdate>(out, &out->update);
    actions.push_back(std::move(a));
  }

  std::vector<Action> actions;
  // The payloads serialized in this pass (WatchWrite::shared), by payload and kind.
  absl::flat_hash_map<std::pair<const void*, int>, std::shared_ptr<const std::string>> wires;
  std::vector<uint64_t> wake_when_done;  // Busy viewers with something pending.
  std::vector<PrepareTask> prepare;      // Started once the sinks were called.
};

WatchHub::WatchHub(const SessionManager* manager, WatchHubOptions options)
    : manager_(manager), options_(std::move(options)), mailbox_(std::make_shared<Mailbox>()) {
  {
    absl::MutexLock lock(&mailbox_->mu);
    mailbox_->hub = this;
  }
  if (options_.prepare == nullptr) worker_ = std::make_unique<SerialWorker>();
  if (options_.start_thread) thread_ = std::thread([this] { Run(); });
}

WatchHub::~WatchHub() { Shutdown(); }

absl::Duration WatchHub::ClampInterval(double seconds, absl::Status* error) const {
  if (!std::isfinite(seconds) || seconds < 0) {
    *error = absl::InvalidArgumentError(
        absl::StrCat("the watch interval must be a finite number of seconds >= 0 (0: default "
                     "0.5), not ",
                     seconds));
    return absl::ZeroDuration();
  }
  if (seconds == 0) return options_.default_interval;
  return std::clamp(absl::Seconds(seconds), options_.min_interval, options_.max_interval);
}

absl::StatusOr<uint64_t> WatchHub::Subscribe(const v1::WatchRequest& request, WatchSink* sink) {
  absl::Status error;
  Incoming in;
  in.interval = ClampInterval(request.interval_s(), &error);
  if (!error.ok()) return error;
  switch (request.target_case()) {
    case v1::WatchRequest::kSession: {
      const std::string& ref = request.session().session_id();
      if (ref.empty()) {
        return absl::InvalidArgumentError("Watch needs a session id or \"latest\"");
      }
      absl::StatusOr<SessionManager::Found> found = manager_->Find(ref);
      if (!found.ok()) return found.status();
      in.session_id = std::move(found->id);
      in.session = std::move(found->session);
      break;
    }
    case v1::WatchRequest::kJobId:
      if (request.job_id().empty()) return absl::InvalidArgumentError("Watch needs a job id");
      if (manager_->List(request.job_id()).empty()) {
        return absl::NotFoundError(
            absl::StrCat("no session has job id \"", request.job_id(), "\""));
      }
      in.job_id = request.job_id();
      break;
    default:
      return absl::InvalidArgumentError(
          "Watch needs a target: a session id, \"latest\" or a job id");
  }
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("tracetorchd is shutting down");
  in.id = next_id_++;
  links_[in.id].sink = sink;
  ++open_;
  const uint64_t id = in.id;
  incoming_.push_back(std::move(in));
  wake_ = true;
  return id;
}

void WatchHub::WriteDone(uint64_t viewer, bool ok) {
  absl::MutexLock lock(&mu_);
  auto it = links_.find(viewer);
  if (it == links_.end() || it->second.closed) return;
  Link& link = it->second;
  link.writing = false;
  if (!ok) link.failed = true;
  if (!ok || link.wake_on_done) wake_ = true;
  link.wake_on_done = false;
}

void WatchHub::Cancel(uint64_t viewer) {
  absl::MutexLock lock(&mu_);
  auto it = links_.find(viewer);
  if (it == links_.end() || it->second.closed) return;
  it->second.cancelled = true;
  wake_ = true;
}

void WatchHub::Remove(uint64_t viewer) {
  absl::MutexLock lock(&mu_);
  auto it = links_.find(viewer);
  if (it == links_.end()) return;
  if (!it->second.closed) --open_;
  links_.erase(it);
}

void WatchHub::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

WatchHubStats WatchHub::stats() const {
  WatchHubStats s;
  {
    absl::MutexLock lock(&mu_);
    s.watchers = open_;
  }
  s.updates_sent = updates_sent_.load(std::memory_order_relaxed);
  s.updates_coalesced = updates_coalesced_.load(std::memory_order_relaxed);
  return s;
}

absl::Time WatchHub::Poll() {
  absl::MutexLock poll(&poll_mu_);
  absl::Time next;
  do {
    next = PollLocked(/*force_close=*/false, nullptr);
  } while (HasPrepared());
  return next;
}

void WatchHub::Run() {
  absl::Time next = absl::InfinitePast();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wake_ || stop_thread_; };
      mu_.AwaitWithDeadline(absl::Condition(&ready), next);
      if (stop_thread_) return;
    }
    absl::MutexLock poll(&poll_mu_);
    next = PollLocked(/*force_close=*/false, nullptr);
  }
}

void WatchHub::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    stop_thread_ = true;
  }
  if (thread_.joinable()) thread_.join();
  // Every viewer gets `shutdown`; wait (bounded) for them to take it.
  const absl::Time deadline = absl::Now() + options_.shutdown_grace;
  bool all_closed = false;
  while (!all_closed) {
    {
      absl::MutexLock poll(&poll_mu_);
      PollLocked(/*force_close=*/false, &all_closed);
    }
    if (all_closed) break;
    absl::MutexLock lock(&mu_);
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wake_; };
    if (!mu_.AwaitWithDeadline(absl::Condition(&woken), deadline)) break;
  }
  if (!all_closed) {
    absl::MutexLock poll(&poll_mu_);
    PollLocked(/*force_close=*/true, nullptr);
  }
  // Preparations from now on are dropped, and never touch the hub.
  {
    absl::MutexLock lock(&mailbox_->mu);
    mailbox_->hub = nullptr;
    mailbox_->ready.clear();
  }
  if (worker_ != nullptr) worker_->Stop();
}

void WatchHub::StartPreparing(PrepareTask task) {
  std::function<void()> run = [mailbox = mailbox_, task = std::move(task)] {
    std::function<void()> take_back = task();
    absl::MutexLock lock(&mailbox->mu);
    if (mailbox->hub == nullptr) return;
    mailbox->ready.push_back(std::move(take_back));
    mailbox->hub->Wake();
  };
  if (options_.prepare != nullptr) {
    options_.prepare(std::move(run));
  } else {
    worker_->Post(std::move(run));  // False once stopped: every viewer is closed by then.
  }
}

bool WatchHub::HasPrepared() const {
  absl::MutexLock lock(&mailbox_->mu);
  return !mailbox_->ready.empty();
}

bool WatchHub::TakePrepared() {
  std::vector<std::function<void()>> ready;
  {
    absl::MutexLock lock(&mailbox_->mu);
    ready.swap(mailbox_->ready);
  }
  for (std::function<void()>& take_back : ready) take_back();
  return !ready.empty();
}

absl::Duration WatchHub::NextPhase() {
  constexpr double kGoldenFraction = 0.6180339887498949;  // (sqrt(5) - 1) / 2.
  const double f = std::fmod(static_cast<double>(feeds_made_++) * kGoldenFraction, 1.0);
  return options_.min_interval * f;
}

void WatchHub::AddViewers(std::vector<Incoming> incoming, absl::Time now) {
  // Called inside Attach, which the analysis cannot see into: AddViewers holds poll_mu_.
  auto phase = [this] {
    poll_mu_.AssertHeld();
    return NextPhase();
  };
  for (Incoming& in : incoming) {
    std::shared_ptr<SessionFeed> feed;
    std::shared_ptr<JobFeed> job;
    std::shared_ptr<EvictedFeed> evicted;
    absl::Duration tick_phase;
    if (!in.job_id.empty()) {
      auto& shared = Attach(
          job_feeds_, in.job_id, [&] { return std::make_shared<JobFeed>(in.job_id); }, phase);
      job = shared.feed;
      tick_phase = shared.phase;
    } else if (in.session != nullptr) {
      const Session* key = in.session.get();
      auto& shared = Attach(
          feeds_, key, [&] { return std::make_shared<SessionFeed>(in.session); }, phase);
      feed = shared.feed;
      tick_phase = shared.phase;
    } else {
      auto& shared = Attach(
          evicted_feeds_, in.session_id,
          [&] { return std::make_shared<EvictedFeed>(in.session_id); }, phase);
      evicted = shared.feed;
      tick_phase = shared.phase;
    }
    auto v = std::make_unique<Viewer>(in.id, in.interval, now, tick_phase);
    v->feed = std::move(feed);
    v->job = std::move(job);
    v->evicted = std::move(evicted);
    viewers_.emplace(in.id, std::move(v));
  }
}

void WatchHub::Detach(Viewer& v) {
  if (v.detached) return;
  v.detached = true;
  if (v.feed != nullptr) Release(feeds_, v.feed->session());
  if (v.job != nullptr) Release(job_feeds_, v.job->job_id());
  if (v.evicted != nullptr) Release(evicted_feeds_, v.evicted->session_id());
  v.feed.reset();
  v.job.reset();
  v.evicted.reset();
}

void WatchHub::Close(Viewer& v, absl::Status status, Pass& pass) {
  Detach(v);
  Pass::Action a;
  a.id = v.id;
  a.close = std::move(status);
  pass.actions.push_back(std::move(a));
}

uint64_t WatchHub::CurrentVersion(Viewer& v) {
  if (v.feed != nullptr) return v.feed->Version(pass_);
  if (v.job != nullptr) return v.job->Check(pass_, *manager_);
  return v.machine.base();  // An evicted session does not change.
}

void WatchHub::SendSessionState(Viewer& v, absl::Time now, Pass& pass) {
  SessionFeed& feed = *v.feed;
  const Session::WatchView& view = feed.Refresh(pass_);
  const bool ended = view.state != SessionState::kLive;
  std::shared_ptr<const v1::Snapshot> payload = feed.full();
  bool delta = false;
  if (v.machine.phase() != WatchViewer::Phase::kFirst && !ended) {
    if (std::shared_ptr<const v1::Snapshot> d = feed.Delta(v.machine.base()); d != nullptr) {
      payload = std::move(d);
      delta = true;
    }
  }
  const uint64_t sequence = v.machine.StateSent(
      view.version, ended ? std::optional(feed.full()->session()) : std::nullopt, now);
  pass.Send(v.id, SnapshotUpdate(std::move(payload), delta), sequence,
            UnixNanosOrZero(view.newest_event), /*follow_up=*/ended, options_.clock());
}

void WatchHub::SendJobState(Viewer& v, absl::Time now, Pass& pass) {
  Preparation<JobFeed::Prepared>& prepared = v.job->preparation();
  const auto* ready = prepared.AtOrAfter(v.machine.wanted());
  if (ready == nullptr) {
    const uint64_t version = v.job->Check(pass_, *manager_);
    if (prepared.Start(v.machine.wanted(), version)) {
      pass.prepare.push_back([manager = manager_, job = std::weak_ptr<JobFeed>(v.job),
                              id = v.job->job_id(), version,
                              thresholds = options_.divergence]() -> std::function<void()> {
        JobFeed::Prepared built = JobFeed::Prepare(*manager, id, thresholds);
        return [job, version, built = std::move(built)]() mutable {
          if (auto feed = job.lock()) feed->preparation().Accept(version, std::move(built));
        };
      });
    }
    v.machine.StateNotReady(now);
    return;
  }
  const JobFeed::Prepared& built = ready->value;
  if (!built.job.ok()) {
    Close(v, built.job.status(), pass);
    return;
  }
  const uint64_t sequence = v.machine.StateSent(
      ready->version, built.all_ended ? std::optional(built.last_ended) : std::nullopt, now);
  auto out = std::make_shared<Outgoing>();
  out->update.unsafe_arena_set_allocated_job(const_cast<v1::JobSnapshot*>(built.job->get()));
  out->job = *built.job;
  pass.Send(v.id, std::move(out), sequence, built.newest_event_ns, /*follow_up=*/built.all_ended,
            options_.clock());
}

void WatchHub::SendEvictedState(Viewer& v, absl::Time now, Pass& pass) {
  // No longer in memory: it has ended; its last snapshot (from disk, prepared once), then the end.
  auto& prepared = v.evicted->preparation();
  const auto* ready = prepared.AtOrAfter(0);
  if (ready == nullptr) {
    if (prepared.Start(0, 0)) {
      pass.prepare.push_back([manager = manager_, feed = std::weak_ptr<EvictedFeed>(v.evicted),
                              id = v.evicted->session_id()]() -> std::function<void()> {
        auto snapshot = EvictedFeed::Prepare(*manager, id);
        return [feed, snapshot = std::move(snapshot)]() mutable {
          if (auto f = feed.lock()) f->preparation().Accept(0, std::move(snapshot));
        };
      });
    }
    v.machine.StateNotReady(now);
    return;
  }
  if (!ready->value.ok()) {
    Close(v, ready->value.status(), pass);
    return;
  }
  const std::shared_ptr<const v1::Snapshot>& snapshot = *ready->value;
  if (snapshot->session().state() == v1::SESSION_STATE_LIVE) {
    // Back in memory since the viewer subscribed: its agent resumed it (a restarted daemon that
    // loaded it aborted from the index). Live, so not the end: follow it as a session in memory.
    absl::StatusOr<SessionManager::Found> found = manager_->Find(v.evicted->session_id());
    if (found.ok() && found->session != nullptr) {
      Release(evicted_feeds_, v.evicted->session_id());
      v.evicted.reset();
      const std::shared_ptr<Session>& session = found->session;
      auto phase = [this] {
        poll_mu_.AssertHeld();
        return NextPhase();
      };
      v.feed =
          Attach(
              feeds_, session.get(), [&] { return std::make_shared<SessionFeed>(session); }, phase)
              .feed;
      SendSessionState(v, now, pass);
      return;
    }
  }
  const uint64_t sequence = v.machine.StateSent(0, snapshot->session(), now);
  pass.Send(v.id, SnapshotUpdate(snapshot, /*delta=*/false), sequence, 0, /*follow_up=*/true,
            options_.clock());
}

void WatchHub::Decide(Viewer& v, const WatchViewer::Link& link, const WatchViewer::Pass& now,
                      Pass& pass) {
  const WatchViewer::Step step = v.machine.Next(
      link, now, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_) { return CurrentVersion(v); });
  if (step.coalesced) updates_coalesced_.fetch_add(1, std::memory_order_relaxed);
  using Kind = WatchViewer::Step::Kind;
  switch (step.kind) {
    case Kind::kNothing:
      return;
    case Kind::kWakeOnWrite:
      pass.wake_when_done.push_back(v.id);
      return;
    case Kind::kClose:
      Close(v, step.status, pass);
      return;
    case Kind::kSendEnded: {
      auto out = std::make_shared<Outgoing>();
      *out->update.mutable_session_ended() = v.machine.ended();
      pass.Send(v.id, std::move(out), step.sequence, 0, /*follow_up=*/true, options_.clock());
      return;
    }
    case Kind::kSendShutdown: {
      auto out = std::make_shared<Outgoing>();
      out->update.mutable_shutdown();
      pass.Send(v.id, std::move(out), step.sequence, 0, /*follow_up=*/true, options_.clock());
      return;
    }
    case Kind::kSendState:
      if (v.job != nullptr) {
        SendJobState(v, now.now, pass);
      } else if (v.evicted != nullptr) {
        SendEvictedState(v, now.now, pass);
      } else {
        SendSessionState(v, now.now, pass);
      }
      return;
  }
}

absl::Time WatchHub::PollLocked(bool force_close, bool* all_closed) {
  ++pass_;
  WatchViewer::Pass now;
  now.now = options_.clock();
  now.force_close = force_close;
  std::vector<Incoming> incoming;
  {
    absl::MutexLock lock(&mu_);
    wake_ = false;
    now.shutting_down = shutting_down_;
    incoming.swap(incoming_);
  }
  AddViewers(std::move(incoming), now.now);
  TakePrepared();

  // The callbacks' view of each viewer, read once.
  struct Seen {
    Viewer* v;
    Link link;
  };
  std::vector<Seen> seen;
  std::vector<uint64_t> removed;  // The sink is gone.
  {
    absl::MutexLock lock(&mu_);
    seen.reserve(viewers_.size());
    for (const auto& [id, v] : viewers_) {
      auto link = links_.find(id);
      if (link == links_.end()) {
        removed.push_back(id);
      } else {
        seen.push_back({v.get(), link->second});
      }
    }
  }
  for (uint64_t id : removed) {
    auto it = viewers_.find(id);
    Detach(*it->second);
    viewers_.erase(it);
  }

  Pass pass;
  for (const Seen& s : seen) {
    if (s.link.closed) continue;
    Decide(*s.v, {s.link.writing, s.link.failed, s.link.cancelled}, now, pass);
  }

  // Mark what is about to happen, where the callbacks see it, then do it without the locks.
  {
    absl::MutexLock lock(&mu_);
    for (Pass::Action& a : pass.actions) {
      auto it = links_.find(a.id);
      if (it == links_.end() || it->second.closed) continue;
      Link& link = it->second;
      a.sink = link.sink;
      if (a.close.has_value()) {
        link.closed = true;
        --open_;
      } else {
        link.writing = true;
        link.wake_on_done = a.follow_up;
      }
    }
    for (uint64_t id : pass.wake_when_done) {
      auto it = links_.find(id);
      if (it == links_.end() || it->second.closed) continue;
      if (it->second.writing) {
        it->second.wake_on_done = true;
      } else {
        wake_ = true;  // Completed meanwhile: come back at once.
      }
    }
    if (all_closed != nullptr) *all_closed = open_ == 0 && incoming_.empty();
  }
  for (Pass::Action& a : pass.actions) {
    if (a.sink == nullptr) continue;
    if (a.close.has_value()) {
      a.sink->Close(*a.close);
    } else {
      updates_sent_.fetch_add(1, std::memory_order_relaxed);
      a.sink->SendUpdate(std::move(a.write));
    }
  }
  for (PrepareTask& task : pass.prepare) StartPreparing(std::move(task));

  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, v] : viewers_) {
    if (!v->detached) next = std::min(next, v->machine.wake_at());
  }
  return next;
}

}  // namespace tracetorch::daemon
