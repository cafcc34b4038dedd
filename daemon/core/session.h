// One traced process run as the daemon keeps it: the same aggregation and anomaly detection as the
// agent's embedded mode (TraceAggregator, DetectAnomalies), a bounded per-step history per layer,
// its state (live / finished / aborted) and counters. Plain C++: no sockets and no wire
// messages, fed the plain types of protocol/events.h (and event batches as their bytes, decoded
// by protocol/frame_decoder.h) by an IngestConnection (or a test).
//
// Memory: bounded by SessionLimits (declared layers, history points per layer), never by run
// length.
//
// Thread-safe: the ingest connection mutates it while the snapshot writer and gRPC readers read.
#ifndef TRACETORCH_DAEMON_CORE_SESSION_H_
#define TRACETORCH_DAEMON_CORE_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "daemon/core/flight_status.h"
#include "daemon/core/history.h"
#include "protocol/events.h"
#include "protocol/frame_decoder.h"
#include "protocol/session_info.h"
#include "trace/aggregator.h"
#include "trace/anomaly.h"
#include "trace/record.h"

namespace tracetorch::daemon {

// The connecting process as the kernel reports it (SO_PEERCRED); -1 when unknown.
struct PeerCredentials {
  int32_t pid = -1;
  int32_t uid = -1;
  int32_t gid = -1;
};

struct SessionLimits {
  size_t max_layers = 65536;   // Declared layers per session; wire ids must be below 4x this.
  size_t history_steps = 256;  // History points per layer (>= 4).
};

// What a layer keeps of its latest call whatever an agent sends: the first kMaxLatestTensors
// inputs and outputs, each with at most kMaxTensorDims dimensions (the rest are cut). Layer names,
// types and full names longer than kMaxLayerNameBytes are refused (DeclareLayers).
inline constexpr size_t kMaxLatestTensors = 16;
inline constexpr size_t kMaxTensorDims = 16;
inline constexpr size_t kMaxLayerNameBytes = 1024;
// A layer's latest forward event up to this size is kept encoded and decoded only when a record is
// made (a typical event is 100-300 bytes); a larger one is decoded as it arrives.
inline constexpr size_t kMaxDeferredForwardBytes = 1024;

// An upper bound on the heap one session holds at steady state, any run length: `layers` declared
// layers with `history_steps` history points each, latest tensors and names at their caps. Stated
// in deploy/METRICS.md ("Memory") and checked by session_memory_test.cc.
size_t SessionMemoryBound(size_t layers, size_t history_steps);

// What AddBatch did with a batch.
struct BatchOutcome {
  uint64_t accepted = 0;
  uint64_t rejected = 0;    // Events for undeclared layers.
  uint64_t duplicates = 0;  // Re-sent events the session already holds (skipped, not counted).
  absl::Status error;       // The first rejection's cause (InvalidArgument), OK when none.
};

class Session {
 public:
  // What the daemon persisted about a session, to continue it after a restart.
  struct Restored {
    TraceRecord record;
    protocol::SessionIndexEntry entry;
  };

  // `id` must already be safe as a file name (SessionManager makes it so).
  Session(std::string id, const protocol::Hello& hello, PeerCredentials peer, absl::Time started,
          SessionLimits limits, Thresholds thresholds, std::optional<Restored> restored = {});
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& id() const { return id_; }

  // Declares layers (matched by full_name on re-declaration; a layer without a full name goes by
  // its name). InvalidArgument for a wire id at or above 4 x max_layers, an id re-used for another
  // layer, a type conflict, or a name, type or full name longer than kMaxLayerNameBytes;
  // ResourceExhausted when the session would exceed max_layers. Valid entries before the bad one
  // are kept.
  absl::Status DeclareLayers(absl::Span<const protocol::LayerDecl> layers) ABSL_LOCKS_EXCLUDED(mu_);

  // Feeds a batch, given as its wire bytes (an EventBatch without frame header or AgentMessage
  // tag; protocol/frame_decoder.h decodes it, allocating nothing per event), to the aggregator and
  // the history. Events for undeclared ids are rejected and counted; the rest are applied.
  // De-duplication (agent.proto, "Durability and re-send"): with first_event set, the events below
  // the session's stream position (events + rejected + lost) are skipped as already held, and a
  // first_event above it counts the events in between as lost; the batch's own fields apply
  // either way (the op graph and NaN origin keep the first received).
  // InvalidArgument for bytes that are not an EventBatch: nothing is applied when the batch's own
  // fields are malformed, and the events before the first malformed one otherwise (counted in
  // events(): the caller closes the connection).
  absl::StatusOr<BatchOutcome> AddBatchBytes(std::string_view batch) ABSL_LOCKS_EXCLUDED(mu_);

  void Heartbeat(const protocol::Heartbeat& heartbeat) ABSL_LOCKS_EXCLUDED(mu_);
  // End received: state finished.
  void Finish(const protocol::End& end, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Connection lost without End: state aborted (a finished session stays finished).
  void Abort(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // A reconnect with resume_session_id: live again; events the agent wrote to earlier
  // connections that never arrived count as dropped: with hello.replay_first_event (an agent that
  // re-sends what is not durable), those below it; without, hello.sent_events minus what was
  // received. The agent re-sends its layer table next.
  void Resume(const protocol::Hello& hello, PeerCredentials peer) ABSL_LOCKS_EXCLUDED(mu_);

  // How far the session's latest snapshot on disk goes (the restored one after a restart): the
  // highest batch sequence and the stream position it holds. Zero before any.
  struct Durable {
    uint64_t sequence = 0;
    uint64_t events = 0;
    bool operator==(const Durable&) const = default;
  };
  Durable durable() const ABSL_LOCKS_EXCLUDED(mu_);
  // Calls `listener` after each snapshot write that moves durable(), on the writing thread, until
  // RemoveDurableListener(id) (which waits for a call in progress): the ingest connection's
  // wake-up, so that an acknowledgement leaves at once. `listener` must not block or call into
  // this session.
  uint64_t AddDurableListener(std::function<void()> listener) ABSL_LOCKS_EXCLUDED(listeners_mu_);
  void RemoveDurableListener(uint64_t id) ABSL_LOCKS_EXCLUDED(listeners_mu_);

  SessionState state() const ABSL_LOCKS_EXCLUDED(mu_);
  int32_t peer_uid() const ABSL_LOCKS_EXCLUDED(mu_);

  // What the flight monitor (flight_monitor.h) knows of the process: reported in Info()
  // (SessionInfo.flight, with the NaN origin and when it arrived). A change bumps the version.
  void SetFlight(const FlightStatus& flight) ABSL_LOCKS_EXCLUDED(mu_);
  FlightStatus flight() const ABSL_LOCKS_EXCLUDED(mu_);
  // The NaN origin received so far, with when it arrived (daemon clock).
  struct NanFound {
    NanOrigin origin;
    absl::Time at;
  };
  std::optional<NanFound> nan_found() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether any event was accepted, rejected or reported dropped (restored counts included): a
  // session without is not worth keeping as history (a Hello and nothing else).
  bool has_events() const ABSL_LOCKS_EXCLUDED(mu_);
  protocol::SessionInfo Info() const ABSL_LOCKS_EXCLUDED(mu_);
  protocol::SessionIndexEntry IndexEntry() const ABSL_LOCKS_EXCLUDED(mu_);

  // The trace so far: aggregated layers (merged with the restored record, if any), anomalies,
  // metadata from the agent's identity plus "dropped_events" and "session_id" in metadata.extra.
  TraceRecord Record() const ABSL_LOCKS_EXCLUDED(mu_);
  // Info + Record + per-layer history.
  protocol::Snapshot ToSnapshot() const ABSL_LOCKS_EXCLUDED(mu_);

  // For live viewers (daemon/core/watch_hub.h). Every mutation bumps a version; each layer
  // remembers the version of its first and of its latest accepted event, so that a viewer holding
  // the state of version V needs only the layers (and history entries) changed after V.
  struct WatchView {
    uint64_t version = 0;
    // When the newest accepted event batch reached this session (daemon clock); InfinitePast when
    // none did yet.
    absl::Time newest_event = absl::InfinitePast();
    SessionState state = SessionState::kLive;
    protocol::Snapshot snapshot;  // As ToSnapshot(), taken at `version`.
    // Parallel to snapshot.record.layers and snapshot.history: the version of the entry's
    // latest change and of its first appearance (0: it was restored from disk / never changed).
    std::vector<uint64_t> layer_changed;
    std::vector<uint64_t> layer_born;
    std::vector<uint64_t> history_changed;
    std::vector<uint64_t> history_born;
    // Also parallel to snapshot.history: the version of the layer's latest history thinning (0:
    // never; a viewer's copy older than that cannot be continued), and the version of each
    // point's latest change (HistoryPoint::stamp; parallel to the entry's steps).
    std::vector<uint64_t> history_thinned;
    // Also parallel: the version of the thinning before the latest (0: none; a viewer's copy newer
    // than it and older than history_thinned missed exactly one thinning), and the latest
    // thinning's boundary step (LayerHistory::thin_boundary; 0: never thinned).
    std::vector<uint64_t> history_thinned_before;
    std::vector<uint64_t> history_thin_boundary;
    std::vector<std::vector<uint64_t>> history_point_changed;
  };
  // The current version: cheap (one lock, no copy).
  uint64_t version() const ABSL_LOCKS_EXCLUDED(mu_);
  // WatchView::newest_event without the snapshot.
  absl::Time newest_event() const ABSL_LOCKS_EXCLUDED(mu_);
  // A consistent snapshot with its versions, taken under one lock.
  WatchView GetWatchView() const ABSL_LOCKS_EXCLUDED(mu_);

  // Writes Record() to `path` (WriteTraceFile, atomic) unless nothing changed since the last
  // successful write (or `force`). Returns whether a file was written. Serialised per session.
  // The file also holds, in metadata.extra[kSnapshotAccountingKey], IndexEntry() taken under the
  // same lock as the record: the counts a restarted daemon continues from (TakeSnapshotAccounting),
  // exactly those of the events the file holds.
  absl::StatusOr<bool> WriteSnapshot(const std::string& path, bool force)
      ABSL_LOCKS_EXCLUDED(write_mu_, mu_);

 private:
  TraceRecord RecordLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The aggregator's snapshot with each layer's latest tensors decoded from latest_forward_.
  TraceRecord AggregatedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // RecordLocked() from an aggregator snapshot already taken.
  TraceRecord RecordFromLocked(TraceRecord aggregated) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  protocol::SessionInfo InfoLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  protocol::SessionIndexEntry IndexEntryLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Fills `snap` (ToSnapshot) and, when given, the versions of `view`.
  void SnapshotLocked(protocol::Snapshot* snap, WatchView* view) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Records that aggregator layer `id` changed (or first appeared) at the current version.
  // `thinnings_before`: the layer's LayerHistory::thinnings() before the event was recorded.
  void TouchLayerLocked(int32_t id, bool history_was_empty, uint64_t thinnings_before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t DroppedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Events + rejected + lost: every stream position accounted for.
  uint64_t PositionLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Counts as lost what a (re)connecting agent wrote before and will not send again.
  void AccountHelloLocked(const protocol::Hello& hello) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // AddBatchBytes' pass over the events (session.cc) and what it does per event.
  class ApplyPass;
  int32_t AggIdLocked(uint32_t wire) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void RejectLocked(uint32_t wire, BatchOutcome* out) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void ApplyForwardLocked(const protocol::wire::ForwardFields& e, TraceAggregator::Batch& agg,
                          BatchOutcome* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyBackwardLocked(const protocol::BackwardEvent& e, TraceAggregator::Batch& agg,
                           BatchOutcome* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string id_;
  const absl::Time started_;
  const SessionLimits limits_;
  const Thresholds thresholds_;
  const std::optional<Restored> restored_;
  TraceAggregator aggregator_;  // Thread-safe itself; written only under mu_.

  mutable absl::Mutex mu_;
  protocol::ProcessIdentity identity_ ABSL_GUARDED_BY(mu_);
  PeerCredentials peer_ ABSL_GUARDED_BY(mu_);
  SessionState state_ ABSL_GUARDED_BY(mu_) = SessionState::kLive;
  absl::Time ended_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::vector<int32_t> agg_ids_ ABSL_GUARDED_BY(mu_);  // Wire id -> aggregator id, -1 = none.
  std::vector<std::string> wire_names_ ABSL_GUARDED_BY(mu_);  // Wire id -> full_name.
  std::vector<LayerHistory> history_ ABSL_GUARDED_BY(mu_);    // By aggregator id.
  // Scratch for AddBatchBytes, by aggregator id: the bytes of the layer's last forward event in
  // the batch being added (the record keeps only the latest call's tensors), and the layers that
  // have one.
  std::vector<std::string_view> last_forward_bytes_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> touched_layers_ ABSL_GUARDED_BY(mu_);
  // By aggregator id: the bytes of the layer's latest forward event, when at most
  // kMaxDeferredForwardBytes, kept encoded: its tensors are decoded only when a record is made
  // (AggregatedLocked), not once per batch. Unset: the aggregator holds the latest tensors (a
  // larger event's, decoded at once).
  std::vector<std::optional<std::string>> latest_forward_ ABSL_GUARDED_BY(mu_);
  uint64_t events_ ABSL_GUARDED_BY(mu_) = 0;             // Accepted (including restored).
  uint64_t rejected_events_ ABSL_GUARDED_BY(mu_) = 0;    // Including restored.
  uint64_t client_dropped_ ABSL_GUARDED_BY(mu_) = 0;     // Latest (monotonic) agent count.
  uint64_t lost_events_ ABSL_GUARDED_BY(mu_) = 0;        // In flight across reconnects.
  uint64_t received_this_run_ ABSL_GUARDED_BY(mu_) = 0;  // Since the restore (gap accounting).
  uint64_t last_sequence_ ABSL_GUARDED_BY(mu_) = 0;      // Highest batch sequence applied.
  // Forward passes so far: one more than the highest step of a forward event (0: none yet).
  int64_t forward_passes_ ABSL_GUARDED_BY(mu_) = 0;
  Durable durable_ ABSL_GUARDED_BY(mu_);       // Of the latest snapshot written.
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;  // The version (WatchView).
  // The first op graph received (shared with the records made from it).
  std::shared_ptr<const OpGraph> op_graph_ ABSL_GUARDED_BY(mu_);
  absl::Time newest_event_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  FlightStatus flight_ ABSL_GUARDED_BY(mu_);
  absl::Time nan_found_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // When the origin came.
  // By aggregator id, for WatchView: versions of the latest and first accepted event, and of the
  // first history point (0 = none yet), and of the latest history thinning (0 = never).
  std::vector<uint64_t> layer_changed_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> layer_born_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> history_born_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> history_thinned_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> history_thinned_before_ ABSL_GUARDED_BY(mu_);  // The thinning before.

  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  uint64_t written_changes_ ABSL_GUARDED_BY(write_mu_) = ~0ull;

  absl::Mutex listeners_mu_ ABSL_ACQUIRED_AFTER(write_mu_);
  std::vector<std::pair<uint64_t, std::function<void()>>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  uint64_t next_listener_ ABSL_GUARDED_BY(listeners_mu_) = 1;
};

// Merges a record restored from disk (`before`) with what was aggregated since (`after`): counts
// add, min/max combine, means are weighted by counts, latest values come from `after` where it has
// them, sticky flags OR. Layer order: `before`'s, then layers new in `after`.
// The op graph (ops="on_nan") is `after`'s when it has one, else `before`'s.
TraceRecord MergeRecords(const TraceRecord& before, const TraceRecord& after);

std::string_view ToString(SessionState state);

// The metadata.extra key of a snapshot file's accounting (Session::WriteSnapshot).
inline constexpr char kSnapshotAccountingKey[] = "tracetorchd_session";

// Removes the accounting from a record read from a snapshot file and returns it; nullopt when the
// file has none (written by an older tracetorchd) or it does not parse.
std::optional<protocol::SessionIndexEntry> TakeSnapshotAccounting(TraceRecord* record);

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_SESSION_H_
