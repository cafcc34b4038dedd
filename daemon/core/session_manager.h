// All sessions the daemon knows: live ones in memory, ended ones in memory until evicted, and every
// session in the on-disk index (DATA_DIR/index.json) with its final snapshot
// (DATA_DIR/sessions/<id>.json, the core JSON layout). Plain C++ with no transport: the ingest
// server and the gRPC service are thin adapters over it.
//
// Session ids are made by the daemon, never taken from a client string:
//   "<start time, UTC, YYYYMMDDTHHMMSSZ>-<host, [A-Za-z0-9-] kept, else '_', <= 32
//   chars>-<pid>-<n>-<owner tag, 16 hex digits>"
// so an id is always a safe file name ("../../etc/x" as host becomes "______etc_x"). The owner
// tag (daemon/core/session_key.h) binds the id to the peer uid it was made for.
//
// Ownership: only the uid that created a session continues it. A resume of a known session (in
// memory, in the index, or in a snapshot file) by another uid is refused (PermissionDenied). A
// resume of an id the daemon does not know (it died before persisting the session) continues
// under that id only when the id's owner tag is the peer's; any other such id (another uid's,
// forged, or made by an older daemon) starts a fresh session with a new id (the Welcome says
// resumed = false), so no uid can take over a session id that was never persisted.
//
// A session without events (Session::has_events: a Hello and nothing else) is not history: it is
// listed while in memory, but never written to disk or to the index, and it is the first to go,
// entirely, when ended sessions are evicted.
//
// A data directory that fills up, turns read-only or loses files: the manager keeps serving from
// memory. Every failed snapshot or index write is counted (snapshot_errors, index_errors) and
// logged once per cause (WriteHealth); a session whose latest state could not be written stays in
// memory whatever the limits (Totals::not_durable) and is never acknowledged durable (so its
// agent keeps what it sent); writes are retried with back-off (RetryDue) and catch up by
// themselves when space returns; a sessions folder or index removed under the daemon is made
// again, and a snapshot file removed while its session is in memory is written again.
// WriteFileAtomic never leaves a torn or empty file where a good one was.
//
// Limits: live sessions, in all and per peer uid (a new session beyond either is refused with
// ResourceExhausted and counted in DaemonCounters::limit_hits; a resume is not a new session),
// sessions held in memory (ended ones beyond it are evicted, counted in sessions_evicted; they stay
// listed and readable from disk), index entries (the oldest ended sessions are forgotten, counted
// in limit_hits; their files stay), and the per-session limits (Session).
//
// Fair share across peer uids: whenever a limit or retain_sessions takes ended sessions (from
// memory, from the index, or from disk), each one taken is the oldest of the uid that holds the
// most sessions at that moment. So one uid opening sessions without end evicts and prunes its own
// first, and cannot push another uid's sessions out while it holds more than that uid; with one uid
// the rule is plain oldest-first. (retain_for, the age limit, applies to every uid alike.)
//
// Thread-safe.
#ifndef TRACETORCH_DAEMON_CORE_SESSION_MANAGER_H_
#define TRACETORCH_DAEMON_CORE_SESSION_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/counters.h"
#include "daemon/core/data_dir.h"
#include "daemon/core/session.h"
#include "daemon/core/session_key.h"
#include "daemon/core/write_health.h"
#include "protocol/events.h"
#include "protocol/session_info.h"

namespace tracetorch::daemon {

struct SessionManagerOptions {
  std::string data_dir;  // Empty: nothing is persisted (tests).
  size_t max_live_sessions = 1024;
  size_t max_live_sessions_per_uid = 256;  // 0: no limit but max_live_sessions.
  // Live and attached sessions always stay; beyond this, ended ones are evicted, oldest first.
  size_t max_sessions_in_memory = 256;
  size_t max_index_entries = 10000;
  // DATA_DIR/index.json is rewritten at most this often: a session ending marks it due, and
  // FlushIndexIfDue() (the daemon's housekeeping, every 250 ms) writes it once the interval has
  // passed since the last write. Shutdown() always writes it.
  absl::Duration index_interval = absl::Seconds(1);
  // Retention of ended sessions (index entry and snapshot file deleted, oldest first): at most
  // retain_sessions of them (0: no limit but max_index_entries), none that ended longer than
  // retain_for ago (zero: kept for ever). Applied as sessions end, when the index is flushed and
  // at startup.
  size_t retain_sessions = 0;
  absl::Duration retain_for = absl::ZeroDuration();
  SessionLimits session_limits;
  Thresholds thresholds;
};

// Makes a session id (see above). `counter` disambiguates.
std::string MakeSessionId(int64_t start_unix_ns, std::string_view host, int32_t pid,
                          uint64_t counter);

class SessionManager {
 public:
  using Clock = std::function<absl::Time()>;

  // Locks the data directory (DataDirLock: FailedPrecondition while another daemon holds it),
  // creates DATA_DIR/sessions (0750), removes temporary files a killed daemon left, and loads
  // DATA_DIR/index.json when present; sessions the index lists as live (the daemon died) become
  // aborted. InvalidArgument for invalid thresholds or limits, Internal/PermissionDenied when the
  // data directory cannot be created, InvalidArgument when the index does not parse (the message
  // names the file). Files it writes are 0640 whatever the umask.
  static absl::StatusOr<std::unique_ptr<SessionManager>> Create(SessionManagerOptions options,
                                                                DaemonCounters* counters,
                                                                Clock clock = absl::Now);

  struct Opened {
    std::shared_ptr<Session> session;
    bool resumed = false;
    uint64_t attachment = 0;  // Pass back to Release().
  };

  // Starts a session for a Hello, or resumes the one named by hello.resume_session_id (in memory,
  // or from the index after a daemon restart) when it is not finished and the peer has the same
  // uid. An id this manager does not know (the daemon died before indexing it) whose owner tag is
  // the peer's is taken up again as a new session under that id, what the agent sent and will not
  // re-send counted as dropped (resumed is true); a finished id, a malformed one, one tagged for
  // another uid (or untagged) or one whose snapshot file exists starts a session of a new id.
  // InvalidArgument for an unsupported protocol version; ResourceExhausted at the live-session
  // limits (in all, per uid); PermissionDenied when another uid tries to resume a known session.
  absl::StatusOr<Opened> Open(const protocol::Hello& hello, const PeerCredentials& peer)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The connection that opened `attachment` is gone, or its agent sent End (`ended`). Without
  // `ended` a live session becomes aborted. Either way its snapshot (when it has events) is
  // written before this returns, whatever the back-off (a write error is counted in
  // snapshot_errors, and the session stays in memory), and the index is written when due (see
  // index_interval). A stale attachment (the agent already reconnected) is ignored.
  void Release(const std::shared_ptr<Session>& session, uint64_t attachment, bool ended)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Sessions, oldest first; only `job_id`'s when non-empty.
  std::vector<protocol::SessionInfo> List(std::string_view job_id = "") const
      ABSL_LOCKS_EXCLUDED(mu_);

  // A session's snapshot by id or "latest" (most recently started). Sessions no longer in memory
  // are read from their snapshot file (no history): NotFound when it is gone, Internal when it
  // cannot be read or parsed. NotFound for an unknown id, and for "latest" without sessions.
  absl::StatusOr<protocol::Snapshot> GetSnapshot(std::string_view ref) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // What `ref` (an id or "latest") resolves to now: the session id and, while the session is in
  // memory, the Session itself (null once evicted: read it with GetSnapshot). NotFound as for
  // GetSnapshot. For live viewers (daemon/core/watch_hub.h).
  struct Found {
    std::string id;
    std::shared_ptr<Session> session;
  };
  absl::StatusOr<Found> Find(std::string_view ref) const ABSL_LOCKS_EXCLUDED(mu_);

  // Writes the snapshot of every in-memory session with events that changed since its last
  // write (or whose file is gone), then the index if anything changed and it is due. Called every
  // snapshot interval, and whenever RetryDue(). While writes fail it waits out the back-off and
  // stops at the first failure.
  void WriteDueSnapshots() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether snapshot writes failed and their back-off has passed: time for WriteDueSnapshots.
  bool RetryDue() const;

  // Applies retention and writes the index if it changed and index_interval has passed since its
  // last write.
  void FlushIndexIfDue() ABSL_LOCKS_EXCLUDED(mu_);

  // Final snapshots: live sessions become aborted (a restarted daemon resumes them), every
  // in-memory session is written, then the index.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  struct Totals {
    uint64_t live = 0;
    uint64_t in_memory = 0;
    uint64_t known = 0;
    uint64_t dropped_events = 0;  // Over the sessions in memory.
    uint64_t not_durable = 0;     // Sessions whose latest snapshot write failed (kept in memory).
  };
  Totals totals() const ABSL_LOCKS_EXCLUDED(mu_);

  // The snapshot path of a session id (DATA_DIR/sessions/<id>.json); empty without a data dir.
  std::string SnapshotPath(std::string_view id) const;
  // Whether sessions are written to disk (a data directory): without, nothing is ever durable,
  // and the ingest connections acknowledge nothing (agents then keep nothing for re-sending).
  bool persistent() const { return !options_.data_dir.empty(); }

 private:
  struct Entry {
    std::shared_ptr<Session> session;   // Null once evicted.
    protocol::SessionIndexEntry index;  // Refreshed when the session is written or evicted.
    uint64_t attachment = 0;            // Current attachment; 0 = none.
    absl::Time started;
    bool not_durable = false;  // The latest snapshot write failed: kept in memory until one works.
  };

  SessionManager(SessionManagerOptions options, DaemonCounters* counters, Clock clock);
  absl::Status LoadIndex();
  // What a resume of `id` (listed in the index as `index`) continues from: the snapshot file's
  // record and accounting; the index entry when the file has no accounting (an older daemon's);
  // zero counts when there is no file.
  Session::Restored RestoreLocked(const std::string& id,
                                  const protocol::SessionIndexEntry& index) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `session`'s snapshot when it changed (or `force`); false when the write failed.
  bool WriteSession(const std::shared_ptr<Session>& session, bool force);
  void WriteIndex() ABSL_LOCKS_EXCLUDED(mu_, index_mu_);
  void WriteIndexIfDue() ABSL_LOCKS_EXCLUDED(mu_, index_mu_);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  using EntryFilter = std::function<bool(const Entry&)>;
  // Up to `excess` ids among the entries `eligible` accepts, each the oldest eligible one of the
  // uid that then holds the most entries `counted` accepts (ties: the older session goes), so a
  // uid over its share loses its own sessions first. With one uid: the oldest eligible ones.
  std::vector<std::string> FairVictimsLocked(size_t excess, const EntryFilter& counted,
                                             const EntryFilter& eligible) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the entries of `ids` (from entries_ and order_) and marks the index dirty.
  void ForgetLocked(const std::vector<std::string>& ids) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int32_t UidLocked(const Entry& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Not live and not attached: retention and the limits may take it.
  bool EndedLocked(const Entry& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the ended sessions retention no longer keeps; returns their snapshot paths, to delete
  // outside the lock (RemoveSnapshots).
  std::vector<std::string> PruneLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveSnapshots(const std::vector<std::string>& paths) const;
  std::string NewIdLocked(const protocol::ProcessIdentity& identity, absl::Time started,
                          int32_t uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SessionManagerOptions options_;
  DaemonCounters* const counters_;
  const Clock clock_;
  WriteHealth snapshot_health_;
  WriteHealth index_health_;
  std::optional<SessionKey> key_;  // Set by Create(); constant afterwards.

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);  // By start, oldest first.
  uint64_t next_counter_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_attachment_ ABSL_GUARDED_BY(mu_) = 1;
  bool index_dirty_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_index_write_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

  absl::Mutex index_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // Serialises index writes.
  std::unique_ptr<DataDirLock> lock_;  // Held for the manager's lifetime (with a data dir).
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_SESSION_MANAGER_H_
