#include "daemon/core/session_manager.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/crash_point.h"
#include "daemon/core/data_dir.h"
#include "protocol/session_info_proto.h"
#include "protocol/wire.h"
#include "spdlog/spdlog.h"
#include "trace/atomic_file.h"
#include "trace/json.h"

namespace tracetorch::daemon {
namespace {

bool IsSafeId(std::string_view id) {
  if (id.empty() || id.size() > 200) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string MakeSessionId(int64_t start_unix_ns, std::string_view host, int32_t pid,
                          uint64_t counter) {
  std::string safe_host;
  for (char c : host.substr(0, 32)) {
    const bool keep =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    safe_host.push_back(keep ? c : '_');
  }
  if (safe_host.empty()) safe_host = "host";
  const std::string time =
      absl::FormatTime("%Y%m%dT%H%M%SZ", absl::FromUnixNanos(start_unix_ns), absl::UTCTimeZone());
  return absl::StrCat(time, "-", safe_host, "-", pid < 0 ? 0 : pid, "-", counter);
}

absl::StatusOr<std::unique_ptr<SessionManager>> SessionManager::Create(
    SessionManagerOptions options, DaemonCounters* counters, Clock clock) {
  if (absl::Status s = options.thresholds.Validate(); !s.ok()) return s;
  if (options.max_live_sessions == 0 || options.session_limits.max_layers == 0 ||
      options.max_index_entries == 0) {
    return absl::InvalidArgumentError(
        "max live sessions, max layers per session and max index entries must be positive");
  }
  if (options.session_limits.history_steps < 4) {
    return absl::InvalidArgumentError("history steps per layer must be at least 4");
  }
  std::unique_ptr<DataDirLock> lock;
  if (!options.data_dir.empty()) {
    absl::StatusOr<std::unique_ptr<DataDirLock>> locked = DataDirLock::Acquire(options.data_dir);
    if (!locked.ok()) return locked.status();
    lock = *std::move(locked);
    const std::string sessions = absl::StrCat(options.data_dir, "/sessions");
    if (absl::Status s = MakeDataDirectory(sessions); !s.ok()) return s;
    // Whatever a killed daemon was writing when it died.
    const int leftovers = RemoveLeftoverTemps(options.data_dir) + RemoveLeftoverTemps(sessions);
    if (leftovers > 0) spdlog::info("removed {} unfinished temporary files", leftovers);
  }
  absl::StatusOr<SessionKey> key =
      options.data_dir.empty() ? SessionKey::Random() : SessionKey::LoadOrCreate(options.data_dir);
  if (!key.ok()) return key.status();
  std::unique_ptr<SessionManager> m(
      new SessionManager(std::move(options), counters, std::move(clock)));
  m->lock_ = std::move(lock);
  m->key_ = *std::move(key);
  if (absl::Status s = m->LoadIndex(); !s.ok()) return s;
  std::vector<std::string> pruned;
  {
    absl::MutexLock l(&m->mu_);
    pruned = m->PruneLocked(m->clock_());
  }
  m->RemoveSnapshots(pruned);
  return m;
}

SessionManager::SessionManager(SessionManagerOptions options, DaemonCounters* counters, Clock clock)
    : options_(std::move(options)),
      counters_(counters),
      clock_(std::move(clock)),
      snapshot_health_("snapshot", &counters_->snapshot_errors),
      index_health_("index", &counters_->index_errors) {}

std::string SessionManager::SnapshotPath(std::string_view id) const {
  if (options_.data_dir.empty()) return "";
  return absl::StrCat(options_.data_dir, "/sessions/", std::string(id), ".json");
}

absl::Status SessionManager::LoadIndex() {
  if (options_.data_dir.empty()) return absl::OkStatus();
  const std::string path = absl::StrCat(options_.data_dir, "/index.json");
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (text.status().code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<protocol::SessionIndexEntry>> index =
      protocol::SessionIndexFromJson(*text);
  if (!index.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", index.status().message()));
  }
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_();
  for (protocol::SessionIndexEntry& e : *index) {
    const std::string id = e.info.session_id;
    if (!IsSafeId(id) || entries_.contains(id)) {
      spdlog::warn("index {}: skipping entry with invalid or duplicate session id", path);
      continue;
    }
    if (e.info.state == SessionState::kLive) {
      // The previous daemon died with it live; its agent may still resume it.
      e.info.state = SessionState::kAborted;
      e.info.ended = now;
    }
    Entry entry;
    entry.started = e.info.started;
    entry.index = std::move(e);
    entries_.emplace(id, std::move(entry));
    order_.push_back(id);
  }
  next_counter_ = entries_.size() + 1;
  spdlog::info("loaded {} sessions from {}", entries_.size(), path);
  return absl::OkStatus();
}

std::string SessionManager::NewIdLocked(const protocol::ProcessIdentity& identity,
                                        absl::Time started, int32_t uid) {
  while (true) {
    std::string id = key_->Tag(
        MakeSessionId(absl::ToUnixNanos(started), identity.host, identity.pid, next_counter_++),
        uid);
    if (!entries_.contains(id)) return id;
  }
}

absl::StatusOr<SessionManager::Opened> SessionManager::Open(const protocol::Hello& hello,
                                                            const PeerCredentials& peer) {
  if (hello.protocol_version != protocol::wire::kProtocolVersion) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported protocol version ",
                                                   hello.protocol_version,
                                                   "; this tracetorchd speaks version 1"));
  }
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_();

  if (const std::string& resume = hello.resume_session_id; !resume.empty()) {
    auto it = entries_.find(resume);
    if (it != entries_.end()) {
      Entry& e = it->second;
      const bool finished = e.session != nullptr ? e.session->state() == SessionState::kFinished
                                                 : e.index.info.state == SessionState::kFinished;
      if (!finished) {
        const int32_t owner = e.session != nullptr ? e.session->peer_uid() : e.index.info.peer_uid;
        if (owner != peer.uid) {
          return absl::PermissionDeniedError(absl::StrCat("session ", resume, " belongs to uid ",
                                                          owner, "; uid ", peer.uid,
                                                          " cannot resume it"));
        }
        if (e.session != nullptr) {
          e.session->Resume(hello, peer);
        } else {
          e.session =
              std::make_shared<Session>(resume, hello, peer, e.started, options_.session_limits,
                                        options_.thresholds, RestoreLocked(resume, e.index));
        }
        e.attachment = next_attachment_++;
        index_dirty_ = true;
        return Opened{e.session, true, e.attachment};
      }
    }
  }

  // A session whose snapshot is on disk but not in the index (the daemon died between the two):
  // it continues from the snapshot, as if the index had listed it.
  if (const std::string& resume = hello.resume_session_id;
      !resume.empty() && !options_.data_dir.empty() && !entries_.contains(resume) &&
      IsSafeId(resume)) {
    absl::StatusOr<TraceRecord> record = ReadTraceFile(SnapshotPath(resume));
    std::optional<protocol::SessionIndexEntry> accounting;
    if (record.ok()) accounting = TakeSnapshotAccounting(&*record);
    if (accounting.has_value() && accounting->info.session_id == resume &&
        accounting->info.state != SessionState::kFinished) {
      if (accounting->info.peer_uid != peer.uid) {
        return absl::PermissionDeniedError(absl::StrCat("session ", resume, " belongs to uid ",
                                                        accounting->info.peer_uid, "; uid ",
                                                        peer.uid, " cannot resume it"));
      }
      Entry e;
      e.started = accounting->info.started;
      Session::Restored restored{*std::move(record), *std::move(accounting)};
      e.session = std::make_shared<Session>(resume, hello, peer, e.started, options_.session_limits,
                                            options_.thresholds, std::move(restored));
      e.attachment = next_attachment_++;
      e.index = e.session->IndexEntry();
      Opened opened{e.session, true, e.attachment};
      entries_.emplace(resume, std::move(e));
      order_.push_back(resume);
      index_dirty_ = true;
      EvictLocked();
      return opened;
    }
  }

  size_t live = 0;
  size_t live_of_uid = 0;
  for (const auto& [id, e] : entries_) {
    if (e.session != nullptr && e.session->state() == SessionState::kLive) {
      ++live;
      if (e.session->peer_uid() == peer.uid) ++live_of_uid;
    }
  }
  if (live >= options_.max_live_sessions) {
    Bump(counters_->limit_hits);
    return absl::ResourceExhaustedError(absl::StrCat(
        "tracetorchd holds ", live, " live sessions, its limit (--max-live-sessions)"));
  }
  if (options_.max_live_sessions_per_uid > 0 && live_of_uid >= options_.max_live_sessions_per_uid) {
    Bump(counters_->limit_hits);
    return absl::ResourceExhaustedError(
        absl::StrCat("uid ", peer.uid, " holds ", live_of_uid,
                     " live sessions, the limit per uid (--max-sessions-per-uid)"));
  }
  Entry e;
  e.started = now;
  // A resume of a session this daemon does not know (its predecessor died before writing it to
  // the index) continues under that id: what the agent had sent then counts as dropped, instead of
  // vanishing into a new session. Never for a malformed id, one whose owner tag is not the peer's
  // (no uid takes over another's id), nor over a snapshot on disk (a session forgotten by the
  // index limit).
  const std::string& resume = hello.resume_session_id;
  const bool adopt = !resume.empty() && !entries_.contains(resume) && IsSafeId(resume) &&
                     key_->Owns(resume, peer.uid) &&
                     (options_.data_dir.empty() || !std::filesystem::exists(SnapshotPath(resume)));
  if (!resume.empty() && !adopt && !entries_.contains(resume)) {
    spdlog::debug("uid {} cannot continue unknown session {} (not tagged for it): a new session",
                  peer.uid, resume);
  }
  const std::string id = adopt ? resume : NewIdLocked(hello.identity, now, peer.uid);
  e.session =
      std::make_shared<Session>(id, hello, peer, now, options_.session_limits, options_.thresholds);
  if (adopt) e.session->Resume(hello, peer);  // Counts hello.sent_events as lost.
  e.attachment = next_attachment_++;
  e.index = e.session->IndexEntry();
  Opened opened{e.session, adopt, e.attachment};
  entries_.emplace(id, std::move(e));
  order_.push_back(id);
  index_dirty_ = true;
  EvictLocked();
  return opened;
}

Session::Restored SessionManager::RestoreLocked(const std::string& id,
                                                const protocol::SessionIndexEntry& index) const {
  Session::Restored restored;
  restored.entry = index;
  if (options_.data_dir.empty()) return restored;
  absl::StatusOr<TraceRecord> record = ReadTraceFile(SnapshotPath(id));
  std::optional<protocol::SessionIndexEntry> accounting;
  if (record.ok()) {
    accounting = TakeSnapshotAccounting(&*record);
    restored.record = *std::move(record);
  }
  if (accounting.has_value()) {
    // The counts of exactly the events the snapshot holds; the index may have been written
    // before or after it.
    restored.entry = *std::move(accounting);
  } else if (!record.ok()) {
    // Nothing of the session is durable: whatever the index counted is not in any file, so the
    // agent's resume counts all it had sent as lost.
    restored.entry.client_dropped_events = 0;
    restored.entry.lost_events = 0;
    restored.entry.last_sequence = 0;
    restored.entry.info.events = 0;
    restored.entry.info.rejected_events = 0;
    restored.entry.info.dropped_events = 0;
    spdlog::warn("resuming session {} without its earlier snapshot: {}", id,
                 record.status().ToString());
  }
  return restored;
}

void SessionManager::Release(const std::shared_ptr<Session>& session, uint64_t attachment,
                             bool ended) {
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(session->id());
    if (it == entries_.end() || it->second.attachment != attachment) return;  // Stale.
    it->second.attachment = 0;
    if (!ended) session->Abort(clock_());
  }
  WriteSession(session, /*force=*/true);
  std::vector<std::string> pruned;
  {
    absl::MutexLock lock(&mu_);
    EvictLocked();
    pruned = PruneLocked(clock_());
  }
  RemoveSnapshots(pruned);
  WriteIndexIfDue();
}

bool SessionManager::WriteSession(const std::shared_ptr<Session>& session, bool force) {
  bool ok = true;
  if (!options_.data_dir.empty() && session->has_events()) {
    const std::string path = SnapshotPath(session->id());
    absl::StatusOr<bool> written = session->WriteSnapshot(path, force);
    if (written.status().code() == absl::StatusCode::kNotFound) {
      // The sessions folder was removed under the daemon: make it again, once.
      const std::string sessions = absl::StrCat(options_.data_dir, "/sessions");
      if (MakeDataDirectory(sessions).ok()) {
        spdlog::warn("{} was removed; made it again", sessions);
        written = session->WriteSnapshot(path, force);
      }
    }
    if (!written.ok()) {
      snapshot_health_.Failed(
          absl::Status(written.status().code(),
                       absl::StrCat("session ", session->id(), ": ", written.status().message())),
          clock_());
      ok = false;
    } else {
      snapshot_health_.Succeeded();
      if (*written) {
        Bump(counters_->snapshots_written);
        CrashPoint("snapshot-written");
      }
    }
  }
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(session->id());
  if (it != entries_.end()) {
    it->second.index = session->IndexEntry();
    it->second.not_durable = !ok;
    index_dirty_ = true;
  }
  return ok;
}

int32_t SessionManager::UidLocked(const Entry& e) const {
  return e.session != nullptr ? e.session->peer_uid() : e.index.info.peer_uid;
}

bool SessionManager::EndedLocked(const Entry& e) const {
  return e.attachment == 0 && (e.session != nullptr ? e.session->state() != SessionState::kLive
                                                    : e.index.info.state != SessionState::kLive);
}

std::vector<std::string> SessionManager::FairVictimsLocked(size_t excess,
                                                           const EntryFilter& counted,
                                                           const EntryFilter& eligible) const {
  std::vector<std::string> victims;
  if (excess == 0) return victims;
  absl::flat_hash_map<int32_t, size_t> held;
  absl::flat_hash_map<int32_t, std::deque<size_t>>
      candidates;  // Positions in order_, oldest first.
  for (size_t i = 0; i < order_.size(); ++i) {
    const Entry& e = entries_.at(order_[i]);
    const int32_t uid = UidLocked(e);
    if (counted(e)) ++held[uid];
    if (eligible(e)) candidates[uid].push_back(i);
  }
  while (victims.size() < excess) {
    std::deque<size_t>* best = nullptr;
    int32_t best_uid = 0;
    for (auto& [uid, queue] : candidates) {
      if (queue.empty()) continue;
      if (best == nullptr || held[uid] > held[best_uid] ||
          (held[uid] == held[best_uid] && queue.front() < best->front())) {
        best = &queue;
        best_uid = uid;
      }
    }
    if (best == nullptr) break;
    victims.push_back(order_[best->front()]);
    best->pop_front();
    if (held[best_uid] > 0) --held[best_uid];
  }
  return victims;
}

void SessionManager::ForgetLocked(const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  const absl::flat_hash_set<std::string_view> gone(ids.begin(), ids.end());
  std::vector<std::string> kept;
  kept.reserve(order_.size());
  for (std::string& id : order_) {
    if (!gone.contains(id)) kept.push_back(std::move(id));
  }
  order_ = std::move(kept);
  for (const std::string& id : ids) entries_.erase(id);
  index_dirty_ = true;
}

void SessionManager::EvictLocked() {
  size_t in_memory = 0;
  for (const auto& [id, e] : entries_) in_memory += e.session != nullptr ? 1 : 0;
  // Ended sessions without events go first, and entirely: they are no history.
  if (in_memory > options_.max_sessions_in_memory) {
    std::vector<std::string> kept;
    kept.reserve(order_.size());
    for (std::string& id : order_) {
      const Entry& e = entries_[id];
      if (in_memory > options_.max_sessions_in_memory && e.session != nullptr &&
          e.attachment == 0 && e.session->state() != SessionState::kLive &&
          !e.session->has_events()) {
        entries_.erase(id);
        --in_memory;
        continue;
      }
      kept.push_back(std::move(id));
    }
    order_ = std::move(kept);
  }
  // Then ended sessions leave memory, fairly across uids (FairVictimsLocked).
  // (Never one whose latest state is only in memory.)
  if (in_memory > options_.max_sessions_in_memory) {
    auto held = [](const Entry& e) { return e.session != nullptr; };
    auto evictable = [this](const Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return e.session != nullptr && !e.not_durable && EndedLocked(e);
    };
    for (const std::string& id :
         FairVictimsLocked(in_memory - options_.max_sessions_in_memory, held, evictable)) {
      Entry& e = entries_.at(id);
      e.index = e.session->IndexEntry();
      e.session.reset();
      Bump(counters_->sessions_evicted);
      index_dirty_ = true;
    }
  }
  // The index itself is bounded: forget ended sessions (their files stay on disk), fairly.
  if (order_.size() > options_.max_index_entries) {
    auto all = [](const Entry&) { return true; };
    auto forgettable = [this](const Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !e.not_durable && EndedLocked(e);
    };
    std::vector<std::string> victims =
        FairVictimsLocked(order_.size() - options_.max_index_entries, all, forgettable);
    for (size_t i = 0; i < victims.size(); ++i) Bump(counters_->limit_hits);
    ForgetLocked(victims);
  }
}

std::vector<std::string> SessionManager::PruneLocked(absl::Time now) {
  std::vector<std::string> pruned;
  const bool by_count = options_.retain_sessions > 0;
  const bool by_age = options_.retain_for > absl::ZeroDuration();
  if (!by_count && !by_age) return pruned;
  auto ended = [this](const Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return EndedLocked(e); };
  std::vector<std::string> victims;
  size_t ended_count = 0;
  for (const std::string& id : order_) {
    const Entry& e = entries_.at(id);
    if (!ended(e)) continue;
    const absl::Time ended_at = e.session != nullptr ? e.session->Info().ended : e.index.info.ended;
    if (by_age && ended_at < now - options_.retain_for) {
      victims.push_back(id);
    } else {
      ++ended_count;
    }
  }
  ForgetLocked(victims);
  if (by_count && ended_count > options_.retain_sessions) {
    std::vector<std::string> more =
        FairVictimsLocked(ended_count - options_.retain_sessions, ended, ended);
    ForgetLocked(more);
    victims.insert(victims.end(), more.begin(), more.end());
  }
  if (!options_.data_dir.empty()) {
    for (const std::string& id : victims) pruned.push_back(SnapshotPath(id));
  }
  if (!victims.empty()) spdlog::info("retention: forgot {} ended sessions", victims.size());
  return pruned;
}

void SessionManager::RemoveSnapshots(const std::vector<std::string>& paths) const {
  for (const std::string& path : paths) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    if (ec) spdlog::warn("retention: cannot remove {}: {}", path, ec.message());
  }
}

void SessionManager::WriteIndexIfDue() {
  {
    absl::MutexLock lock(&mu_);
    if (!index_dirty_ || clock_() - last_index_write_ < options_.index_interval) return;
  }
  if (!index_health_.Due(clock_())) return;  // Failing: waits out the back-off.
  WriteIndex();
}

void SessionManager::FlushIndexIfDue() {
  std::vector<std::string> pruned;
  {
    absl::MutexLock lock(&mu_);
    if (clock_() - last_index_write_ < options_.index_interval) return;
    pruned = PruneLocked(clock_());
  }
  RemoveSnapshots(pruned);
  WriteIndexIfDue();
}

void SessionManager::WriteIndex() {
  if (options_.data_dir.empty()) return;
  absl::MutexLock index_lock(&index_mu_);
  std::vector<protocol::SessionIndexEntry> index;
  {
    absl::MutexLock lock(&mu_);
    if (!index_dirty_) return;
    index_dirty_ = false;
    last_index_write_ = clock_();
    for (const std::string& id : order_) {
      const Entry& e = entries_.at(id);
      if (e.session != nullptr && !e.session->has_events()) continue;  // No history.
      index.push_back(e.session != nullptr ? e.session->IndexEntry() : e.index);
    }
  }
  absl::StatusOr<std::string> encoded = protocol::SessionIndexToJson(index);
  if (!encoded.ok()) {
    index_health_.Failed(encoded.status(), clock_());
    return;
  }
  const std::string& json = *encoded;
  CrashPoint("index");
  const std::string path = absl::StrCat(options_.data_dir, "/index.json");
  absl::Status s = WriteFileAtomic(path, json, kDataFileMode);
  if (s.code() == absl::StatusCode::kNotFound && MakeDataDirectory(options_.data_dir).ok()) {
    spdlog::warn("{} was removed; made it again", options_.data_dir);
    s = WriteFileAtomic(path, json, kDataFileMode);
  }
  if (!s.ok()) {
    index_health_.Failed(s, clock_());
    absl::MutexLock lock(&mu_);
    index_dirty_ = true;
    return;
  }
  index_health_.Succeeded();
}

std::vector<protocol::SessionInfo> SessionManager::List(std::string_view job_id) const {
  std::vector<protocol::SessionInfo> out;
  absl::MutexLock lock(&mu_);
  for (const std::string& id : order_) {
    const Entry& e = entries_.at(id);
    protocol::SessionInfo info = e.session != nullptr ? e.session->Info() : e.index.info;
    if (!job_id.empty() && info.identity.job_id != job_id) continue;
    out.push_back(std::move(info));
  }
  return out;
}

absl::StatusOr<protocol::Snapshot> SessionManager::GetSnapshot(std::string_view ref) const {
  std::shared_ptr<Session> session;
  protocol::SessionInfo info;
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    if (ref == "latest") {
      if (order_.empty()) return absl::NotFoundError("tracetorchd has no sessions yet");
      id = order_.back();
    } else {
      id = std::string(ref);
    }
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat("no session \"", std::string(ref), "\""));
    }
    session = it->second.session;
    info = it->second.index.info;
  }
  if (session != nullptr) return session->ToSnapshot();
  absl::StatusOr<TraceRecord> record = ReadTraceFile(SnapshotPath(id));
  if (!record.ok()) {
    return absl::Status(
        record.status().code() == absl::StatusCode::kNotFound ? absl::StatusCode::kNotFound
                                                              : absl::StatusCode::kInternal,
        absl::StrCat("snapshot of session ", id, " unreadable: ", record.status().message()));
  }
  (void)TakeSnapshotAccounting(&*record);  // The daemon's own bookkeeping, not the trace's.
  protocol::Snapshot snap;
  snap.session = std::move(info);
  snap.record = *std::move(record);
  return snap;
}

absl::StatusOr<SessionManager::Found> SessionManager::Find(std::string_view ref) const {
  absl::MutexLock lock(&mu_);
  Found found;
  if (ref == "latest") {
    if (order_.empty()) return absl::NotFoundError("tracetorchd has no sessions yet");
    found.id = order_.back();
  } else {
    found.id = std::string(ref);
  }
  auto it = entries_.find(found.id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("no session \"", std::string(ref), "\""));
  }
  found.session = it->second.session;
  return found;
}

void SessionManager::WriteDueSnapshots() {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    // Those that failed first (oldest first), so that a retry makes them durable first.
    for (const std::string& id : order_) {
      const Entry& e = entries_.at(id);
      if (e.session != nullptr && e.not_durable) sessions.push_back(e.session);
    }
    for (const std::string& id : order_) {
      const Entry& e = entries_.at(id);
      if (e.session != nullptr && !e.not_durable) sessions.push_back(e.session);
    }
    if (!options_.data_dir.empty() && !order_.empty() &&
        !std::filesystem::exists(absl::StrCat(options_.data_dir, "/index.json"))) {
      index_dirty_ = true;  // Removed under the daemon: written again.
    }
  }
  size_t caught_up = 0;
  if (snapshot_health_.Due(clock_())) {
    for (const auto& s : sessions) {
      // A file removed under the daemon is written again, changed or not.
      const bool gone = !options_.data_dir.empty() && s->has_events() &&
                        !std::filesystem::exists(SnapshotPath(s->id()));
      if (!WriteSession(s, /*force=*/gone)) break;  // Failing: the back-off decides the next.
      ++caught_up;
    }
  }
  if (caught_up > 0) {
    absl::MutexLock lock(&mu_);
    EvictLocked();  // Sessions held for want of a file may leave memory now.
  }
  WriteIndexIfDue();
}

bool SessionManager::RetryDue() const {
  const absl::Time now = clock_();
  return (snapshot_health_.failing() && snapshot_health_.Due(now)) ||
         (index_health_.failing() && index_health_.Due(now));
}

void SessionManager::Shutdown() {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_();
    for (auto& [id, e] : entries_) {
      if (e.session == nullptr) continue;
      e.session->Abort(now);  // Only live ones change.
      e.attachment = 0;
      sessions.push_back(e.session);
    }
    index_dirty_ = true;
  }
  for (const auto& s : sessions) WriteSession(s, /*force=*/false);
  WriteIndex();
}

SessionManager::Totals SessionManager::totals() const {
  Totals t;
  absl::MutexLock lock(&mu_);
  t.known = entries_.size();
  for (const auto& [id, e] : entries_) {
    if (e.session == nullptr) continue;
    ++t.in_memory;
    if (e.session->state() == SessionState::kLive) ++t.live;
    if (e.not_durable) ++t.not_durable;
    t.dropped_events += e.session->Info().dropped_events;
  }
  return t;
}

}  // namespace tracetorch::daemon
