#include "daemon/core/watch_hub.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/job.h"

namespace tracetorch::daemon {
namespace {

// The first tick (a multiple of `interval` since the Unix epoch) at or after `t`.
absl::Time TickAtOrAfter(absl::Time t, absl::Duration interval) {
  const int64_t iv = std::max<int64_t>(1, absl::ToInt64Nanoseconds(interval));
  const int64_t ns = absl::ToUnixNanos(t);
  int64_t q = ns / iv;
  if (q * iv < ns) ++q;
  return absl::FromUnixNanos(q * iv);
}

int64_t UnixNanosOrZero(absl::Time t) {
  return t == absl::InfinitePast() ? 0 : absl::ToUnixNanos(t);
}

// A viewer's update whose payload (a Snapshot or JobSnapshot) may be shared with other viewers'
// updates: the message borrows it (protobuf's unsafe_arena_* calls on a heap message store and
// release the pointer without copying) and gives it back before it is destroyed. Serialisation
// only reads the payload, so several streams may write it at once.
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

// Entries of `from` changed after `base` (or new since), appended to `to`. False when an entry
// new since `base` comes before an older one: a viewer merging by name appends new entries, so
// only a full snapshot would give it the right order.
template <typename T>
bool AppendChanged(const google::protobuf::RepeatedPtrField<T>& from,
                   const std::vector<uint64_t>& changed, const std::vector<uint64_t>& born,
                   uint64_t base, google::protobuf::RepeatedPtrField<T>* to) {
  bool seen_new = false;
  for (int i = 0; i < from.size(); ++i) {
    const size_t k = static_cast<size_t>(i);
    const bool is_new = k < born.size() && born[k] > base;
    if (seen_new && !is_new) return false;
    seen_new = seen_new || is_new;
    if (is_new || (k < changed.size() && changed[k] > base)) *to->Add() = from.Get(i);
  }
  return true;
}

// The history entries of `view` changed after `base`, appended to `to`: for a layer whose
// history the viewer at `base` holds and that was thinned at most once since, only its points
// changed after `base` and those after them (append = true: the viewer drops its points from the
// first step sent and appends), after the thinning (thin_before_step: the viewer first thins its
// copy as the daemon did); a new layer, or one thinned twice or more since, whole (append =
// false). False when an entry new since `base` comes before an older one (as AppendChanged).
bool AppendChangedHistory(const Session::WatchView& view, uint64_t base,
                          google::protobuf::RepeatedPtrField<v1::LayerHistory>* to) {
  const auto& from = view.snapshot.history();
  bool seen_new = false;
  for (int i = 0; i < from.size(); ++i) {
    const size_t k = static_cast<size_t>(i);
    const bool is_new = k < view.history_born.size() && view.history_born[k] > base;
    if (seen_new && !is_new) return false;
    seen_new = seen_new || is_new;
    const bool changed = k < view.history_changed.size() && view.history_changed[k] > base;
    if (!is_new && !changed) continue;
    const v1::LayerHistory& h = from.Get(i);
    const bool thinned = k >= view.history_thinned.size() || view.history_thinned[k] > base;
    // Thinned exactly once since `base`: the viewer's copy is a prefix of the history just before
    // that thinning (but for points changed since, which are sent), so it can replay it.
    const bool thinned_once =
        thinned && k < view.history_thinned.size() && k < view.history_thinned_before.size() &&
        view.history_thinned_before[k] <= base && k < view.history_thin_boundary.size() &&
        view.history_thin_boundary[k] > 0;
    if (is_new || (thinned && !thinned_once) || k >= view.history_point_changed.size()) {
      *to->Add() = h;
      continue;
    }
    const std::vector<uint64_t>& stamps = view.history_point_changed[k];
    const int n = std::min(h.steps_size(), static_cast<int>(stamps.size()));
    int first = 0;
    while (first < n && stamps[static_cast<size_t>(first)] <= base) ++first;
    // Only the layer changed (an event for a step out of reach): nothing to send, unless the
    // thinning must still reach the viewer.
    if (first == n && !thinned_once) continue;
    v1::LayerHistory* a = to->Add();
    a->set_full_name(h.full_name());
    a->set_append(true);
    if (thinned_once) a->set_thin_before_step(view.history_thin_boundary[k]);
    auto tail = [first](const auto& field, auto* out) {
      out->Reserve(std::max(0, field.size() - first));
      for (int j = first; j < field.size(); ++j) out->Add(field.Get(j));
    };
    tail(h.steps(), a->mutable_steps());
    tail(h.latency_ms(), a->mutable_latency_ms());
    tail(h.output_std(), a->mutable_output_std());
    tail(h.grad_norm(), a->mutable_grad_norm());
    tail(h.non_finite(), a->mutable_non_finite());
  }
  return true;
}

}  // namespace

// Where a viewer is in its stream.
enum class WatchPhase {
  kFirst,      // Nothing sent yet.
  kStreaming,  // Updates at its ticks.
  kEnding,     // The final state was sent; session_ended next.
  kTerminal,   // session_ended or shutdown was sent; close next.
};

struct WatchHub::Feed {
  std::shared_ptr<Session> session;
  int viewers = 0;
  uint64_t pass = 0;  // The pass in which `version` was read.
  uint64_t version = 0;
  std::shared_ptr<const Session::WatchView> view;  // The latest built.
  std::shared_ptr<const v1::Snapshot> full;        // view->snapshot.
  size_t full_bytes = 0;
  // Deltas from `view`, by base version; null: the full is smaller (or needed for the order).
  absl::flat_hash_map<uint64_t, std::shared_ptr<const v1::Snapshot>> deltas;

  uint64_t Version(uint64_t now_pass) {
    if (pass != now_pass) {
      version = session->version();
      pass = now_pass;
    }
    return version;
  }

  // The view at the current version (built once per version, whatever the number of viewers).
  const Session::WatchView& Refresh(uint64_t now_pass) {
    Version(now_pass);
    if (view == nullptr || view->version != version) {
      auto fresh = std::make_shared<const Session::WatchView>(session->GetWatchView());
      version = fresh->version;  // May be newer than what Version() read.
      full = std::shared_ptr<const v1::Snapshot>(fresh, &fresh->snapshot);
      full_bytes = full->ByteSizeLong();
      view = std::move(fresh);
      deltas.clear();
    }
    return *view;
  }

  // The delta from `base` to `view`, or null when the full should be sent instead.
  std::shared_ptr<const v1::Snapshot> Delta(uint64_t base) {
    auto [it, inserted] = deltas.try_emplace(base);
    if (!inserted) return it->second;
    const v1::Snapshot& f = view->snapshot;
    auto d = std::make_shared<v1::Snapshot>();
    *d->mutable_session() = f.session();
    v1::TraceRecord* r = d->mutable_record();
    *r->mutable_metadata() = f.record().metadata();
    *r->mutable_warnings() = f.record().warnings();
    const bool ordered = AppendChanged(f.record().layers(), view->layer_changed, view->layer_born,
                                       base, r->mutable_layers()) &&
                         AppendChangedHistory(*view, base, d->mutable_history());
    if (ordered && d->ByteSizeLong() < full_bytes) it->second = std::move(d);
    return it->second;
  }
};

struct WatchHub::JobFeed {
  std::string job_id;
  int viewers = 0;
  uint64_t pass = 0;
  uint64_t version = 0;   // Bumped when the job's sessions (ids, states, counts) change.
  std::string signature;  // What `version` was computed from.
  bool all_ended = false;
  v1::SessionInfo last_ended;
  std::shared_ptr<const v1::JobSnapshot> built;
  uint64_t built_version = 0;
  int64_t newest_event_ns = 0;

  uint64_t Check(uint64_t now_pass, const SessionManager& manager) {
    if (pass == now_pass) return version;
    pass = now_pass;
    std::string sig;
    bool ended = true;
    const v1::SessionInfo* last = nullptr;
    const std::vector<v1::SessionInfo> sessions = manager.List(job_id);
    for (const v1::SessionInfo& s : sessions) {
      absl::StrAppend(&sig, s.session_id(), ":", static_cast<int>(s.state()), ":", s.events(), ":",
                      s.dropped_events(), ":", s.rejected_events(), ";");
      if (s.state() == v1::SESSION_STATE_LIVE) {
        ended = false;
      } else if (last == nullptr || s.ended_unix_ns() >= last->ended_unix_ns()) {
        last = &s;
      }
    }
    if (sig != signature) {
      signature = std::move(sig);
      ++version;
    }
    all_ended = ended && !sessions.empty();
    if (last != nullptr) last_ended = *last;
    return version;
  }

  absl::StatusOr<std::shared_ptr<const v1::JobSnapshot>> Build(
      const SessionManager& manager, const DivergenceThresholds& thresholds) {
    if (built != nullptr && built_version == version) return built;
    absl::StatusOr<v1::JobSnapshot> job = BuildJobSnapshot(manager, job_id, thresholds);
    if (!job.ok()) return job.status();
    newest_event_ns = 0;
    for (const v1::Snapshot& rank : job->ranks()) {
      absl::StatusOr<SessionManager::Found> found = manager.Find(rank.session().session_id());
      if (found.ok() && found->session != nullptr) {
        newest_event_ns =
            std::max(newest_event_ns, UnixNanosOrZero(found->session->newest_event()));
      }
    }
    built = std::make_shared<const v1::JobSnapshot>(*std::move(job));
    built_version = version;
    return built;
  }
};

struct WatchHub::ViewerState {
  uint64_t id = 0;
  absl::Duration interval;
  std::shared_ptr<Feed> feed;    // A session in memory.
  std::string session_id;        // A session no longer in memory (feed and job null).
  std::shared_ptr<JobFeed> job;  // A job.
  WatchPhase phase = WatchPhase::kFirst;
  absl::Time next_due;
  uint64_t base = 0;  // The version (of the feed or job) the viewer holds.
  bool pending = false;
  uint64_t pending_version = 0;
  uint64_t next_sequence = 1;
  v1::SessionInfo ended;  // For session_ended.
  bool detached = false;  // Closed: no longer counted on its feed.
};

// What one pass decided for one viewer.
struct WatchHub::Pass {
  struct Action {
    uint64_t id = 0;
    std::shared_ptr<const v1::WatchUpdate> update;  // Send this, or
    std::optional<absl::Status> close;              // close with this.
    bool follow_up = false;  // Send: the viewer has more to say once it completes.
    WatchSink* sink = nullptr;
  };
  std::vector<Action> actions;
  std::vector<uint64_t> wake_when_done;  // Busy viewers with a pending state.
};

WatchHub::WatchHub(const SessionManager* manager, WatchHubOptions options)
    : manager_(manager), options_(std::move(options)) {
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
  return PollLocked(/*force_close=*/false, nullptr);
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
  while (true) {
    bool all_closed = false;
    {
      absl::MutexLock poll(&poll_mu_);
      PollLocked(/*force_close=*/false, &all_closed);
    }
    if (all_closed) return;
    absl::MutexLock lock(&mu_);
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wake_; };
    if (!mu_.AwaitWithDeadline(absl::Condition(&woken), deadline)) break;
  }
  absl::MutexLock poll(&poll_mu_);
  PollLocked(/*force_close=*/true, nullptr);
}

absl::Time WatchHub::PollLocked(bool force_close, bool* all_closed) {
  ++pass_;
  const absl::Time now = options_.clock();
  std::vector<Incoming> incoming;
  bool shutting = false;
  {
    absl::MutexLock lock(&mu_);
    wake_ = false;
    shutting = shutting_down_;
    incoming.swap(incoming_);
  }
  for (Incoming& in : incoming) {
    auto v = std::make_unique<ViewerState>();
    v->id = in.id;
    v->interval = in.interval;
    v->next_due = now;
    if (!in.job_id.empty()) {
      std::shared_ptr<JobFeed>& job = job_feeds_[in.job_id];
      if (job == nullptr) {
        job = std::make_shared<JobFeed>();
        job->job_id = in.job_id;
      }
      ++job->viewers;
      v->job = job;
    } else if (in.session != nullptr) {
      std::shared_ptr<Feed>& feed = feeds_[in.session.get()];
      if (feed == nullptr) {
        feed = std::make_shared<Feed>();
        feed->session = in.session;
      }
      ++feed->viewers;
      v->feed = feed;
    } else {
      v->session_id = std::move(in.session_id);
    }
    viewers_.emplace(in.id, std::move(v));
  }

  // The callbacks' view of each viewer, read once.
  struct Seen {
    ViewerState* v;
    Link link;
  };
  auto detach = [this](ViewerState& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_) {
    if (v.detached) return;
    v.detached = true;
    if (v.feed != nullptr && --v.feed->viewers == 0) feeds_.erase(v.feed->session.get());
    if (v.job != nullptr && --v.job->viewers == 0) job_feeds_.erase(v.job->job_id);
    v.feed.reset();
    v.job.reset();
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
    detach(*it->second);
    viewers_.erase(it);
  }
  auto next_due = [&](const ViewerState& v, bool on_tick) {
    return on_tick ? TickAtOrAfter(std::max(v.next_due + v.interval, now), v.interval)
                   : TickAtOrAfter(now + v.interval, v.interval);
  };
  // The version the viewer's feed (or job) is at now.
  auto current_version = [&](ViewerState& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_) {
    if (v.feed != nullptr) return v.feed->Version(pass_);
    if (v.job != nullptr) return v.job->Check(pass_, *manager_);
    return v.base;
  };

  Pass pass;
  auto close = [&](ViewerState& v, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_) {
    detach(v);
    Pass::Action a;
    a.id = v.id;
    a.close = std::move(status);
    pass.actions.push_back(std::move(a));
  };
  auto send = [&](ViewerState& v, std::shared_ptr<Outgoing> out, int64_t newest_event_ns) {
    out->update.set_sequence(v.next_sequence++);
    out->update.set_sent_unix_ns(absl::ToUnixNanos(options_.clock()));
    out->update.set_newest_event_unix_ns(newest_event_ns);
    Pass::Action a;
    a.id = v.id;
    a.update = std::shared_ptr<const v1::WatchUpdate>(out, &out->update);
    a.follow_up = v.phase == WatchPhase::kEnding || v.phase == WatchPhase::kTerminal;
    pass.actions.push_back(std::move(a));
  };
  auto send_snapshot = [&](ViewerState& v, std::shared_ptr<const v1::Snapshot> payload, bool delta,
                           int64_t newest_event_ns) {
    auto out = std::make_shared<Outgoing>();
    auto* borrowed = const_cast<v1::Snapshot*>(payload.get());
    if (delta) {
      out->update.unsafe_arena_set_allocated_delta(borrowed);
    } else {
      out->update.unsafe_arena_set_allocated_full(borrowed);
    }
    out->snapshot = std::move(payload);
    send(v, std::move(out), newest_event_ns);
  };
  // The viewer's next state (first: whatever happened), if it changed.
  auto update_viewer = [&](ViewerState& v, bool on_tick) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_) {
    const bool first = v.phase == WatchPhase::kFirst;
    if (v.job != nullptr) {
      const uint64_t version = v.job->Check(pass_, *manager_);
      if (!first && version == v.base) {
        v.pending = false;
        v.next_due = next_due(v, on_tick);
        return;
      }
      absl::StatusOr<std::shared_ptr<const v1::JobSnapshot>> job =
          v.job->Build(*manager_, options_.divergence);
      if (!job.ok()) {
        close(v, job.status());
        return;
      }
      v.base = v.job->built_version;
      v.pending = false;
      v.next_due = first ? next_due(v, false) : next_due(v, on_tick);
      if (v.job->all_ended) {
        v.phase = WatchPhase::kEnding;
        v.ended = v.job->last_ended;
      } else {
        v.phase = WatchPhase::kStreaming;
      }
      auto out = std::make_shared<Outgoing>();
      out->update.unsafe_arena_set_allocated_job(const_cast<v1::JobSnapshot*>(job->get()));
      out->job = *std::move(job);
      send(v, std::move(out), v.job->newest_event_ns);
      return;
    }
    if (v.feed == nullptr) {
      // No longer in memory: it has ended; its last snapshot, then the end.
      absl::StatusOr<v1::Snapshot> snap = manager_->GetSnapshot(v.session_id);
      if (!snap.ok()) {
        close(v, snap.status());
        return;
      }
      v.phase = WatchPhase::kEnding;
      v.ended = snap->session();
      send_snapshot(v, std::make_shared<const v1::Snapshot>(*std::move(snap)), false, 0);
      return;
    }
    if (!first && v.feed->Version(pass_) == v.base) {
      v.pending = false;
      v.next_due = next_due(v, on_tick);
      return;
    }
    Feed& feed = *v.feed;
    const Session::WatchView& view = feed.Refresh(pass_);
    const bool ended = view.state != SessionState::kLive;
    std::shared_ptr<const v1::Snapshot> payload = feed.full;
    bool delta = false;
    if (!first && !ended) {
      if (std::shared_ptr<const v1::Snapshot> d = feed.Delta(v.base); d != nullptr) {
        payload = std::move(d);
        delta = true;
      }
    }
    v.base = view.version;
    v.pending = false;
    v.next_due = first ? next_due(v, false) : next_due(v, on_tick);
    if (ended) {
      v.phase = WatchPhase::kEnding;
      v.ended = view.snapshot.session();
    } else {
      v.phase = WatchPhase::kStreaming;
    }
    send_snapshot(v, std::move(payload), delta, UnixNanosOrZero(view.newest_event));
  };

  for (Seen& s : seen) {
    ViewerState& v = *s.v;
    const Link& f = s.link;
    if (f.closed) continue;
    if (force_close) {
      close(v, v.phase == WatchPhase::kTerminal && !f.writing
                   ? absl::OkStatus()
                   : absl::UnavailableError("tracetorchd is shutting down"));
      continue;
    }
    if (f.failed || f.cancelled) {
      v.next_due = absl::InfiniteFuture();  // No more ticks: its write completing wakes us.
      if (f.writing) {
        pass.wake_when_done.push_back(v.id);
      } else {
        close(v, absl::CancelledError("the viewer went away"));
      }
      continue;
    }
    if (f.writing) {
      if (shutting || v.phase != WatchPhase::kStreaming) {
        pass.wake_when_done.push_back(v.id);
      } else if (now >= v.next_due) {
        // A tick while the viewer is still writing: the newer state waits, replacing an older
        // waiting one (whose sequence number is then skipped).
        const uint64_t version = current_version(v);
        if (version != (v.pending ? v.pending_version : v.base)) {
          if (v.pending) {
            updates_coalesced_.fetch_add(1, std::memory_order_relaxed);
            ++v.next_sequence;
          }
          v.pending = true;
          v.pending_version = version;
        }
        v.next_due = next_due(v, /*on_tick=*/true);
      }
      if (v.pending) pass.wake_when_done.push_back(v.id);
      continue;
    }
    if (shutting) {
      if (v.phase == WatchPhase::kTerminal) {
        close(v, absl::OkStatus());
      } else {
        v.phase = WatchPhase::kTerminal;
        auto out = std::make_shared<Outgoing>();
        out->update.mutable_shutdown();
        send(v, std::move(out), 0);
      }
      continue;
    }
    switch (v.phase) {
      case WatchPhase::kTerminal:
        close(v, absl::OkStatus());
        break;
      case WatchPhase::kEnding: {
        v.phase = WatchPhase::kTerminal;
        auto out = std::make_shared<Outgoing>();
        *out->update.mutable_session_ended() = v.ended;
        send(v, std::move(out), 0);
        break;
      }
      case WatchPhase::kFirst:
        update_viewer(v, /*on_tick=*/false);
        break;
      case WatchPhase::kStreaming:
        if (v.pending) {
          update_viewer(v, /*on_tick=*/false);
        } else if (now >= v.next_due) {
          update_viewer(v, /*on_tick=*/true);
        }
        break;
    }
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
      a.sink->SendUpdate(std::move(a.update));
    }
  }

  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, v] : viewers_) {
    if (!v->detached && v->phase == WatchPhase::kStreaming) next = std::min(next, v->next_due);
  }
  return next;
}

}  // namespace tracetorch::daemon
