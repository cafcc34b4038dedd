// `tracetorch watch --remote`: follows a daemon session (or every rank of a job) over the
// TraceService Watch stream and shows it live with the shared renderer (live_view.h).
//
//  - Terminal (redraw_in_place): each frame is drawn over the previous one (cursor home, each
//    line cleared to its end, the rest of the screen cleared), cut to the terminal's width and
//    height, so nothing flickers or scrolls.
//  - Pipe: plain frames appended, separated by a blank line.
//  - JSON (--json): one JSON document per line, one per update received and one per connection
//    change, for scripts:
//      {"type": "update", "kind": "full"|"delta"|"session_ended"|"shutdown", "sequence": N,
//       "newest_event_unix_ns": N, "ended": BOOL, "session": SESSION, "record": RECORD,
//       "history": [HISTORY...]}
//      {"type": "job", "kind": "job"|"session_ended"|"shutdown", "sequence": N, "ended": BOOL,
//       "job_id": "...", "ranks": [{"session": SESSION, "record": RECORD,
//       "history": [HISTORY...]}], "divergences": [ANOMALY...]}
//      {"type": "status", "status": "reconnecting"|"connected", "message": "..."}
//    SESSION: {"session_id", "state" ("live"|"finished"|"aborted"|"unknown"), "pid", "host",
//    "rank" (null when unknown), "job_id", "model", "started_unix_ns", "ended_unix_ns", "events",
//    "dropped_events", "rejected_events"}. RECORD: the watched state after the update, as the core
//    JSON writer writes a trace (trace/json.h, on one line), filtered like `inspect --json`.
//    HISTORY: {"full_name", "steps": [N...], "latency_ms", "output_std", "grad_norm": [X|null...],
//    "non_finite": [BOOL...]}, oldest step first. ANOMALY: {"type", "severity", "layer",
//    "message", "details": {...}}.
//
// Connection: the first update names the session ("latest" resolves to an id then); after that,
// every reconnect re-subscribes to that same session id. When the daemon goes away (or says it is
// shutting down) the view keeps the last state, says "reconnecting", and retries with exponential
// backoff until the daemon is back or the watch is stopped. When the session ends (finished, or
// aborted and not resumed within `resume_wait`) the final state is shown and Run() returns OK.
// JSON: while an aborted session may still resume, a {"type": "status", "status": "interrupted"}
// line stands for its session_ended update, so "ended": true is only ever the final document.
//
// Errors (Run's status, for one line on stderr): before any update arrived, an unknown session
// (NotFound) or an unreachable daemon (Unavailable) is retried until `connect_timeout` has passed,
// then reported; Unauthenticated, PermissionDenied, InvalidArgument and Unimplemented end the
// watch at once, at any time.
//
// The JSON documents are written by cli/json_output.h, the in-place redraw by view/terminal.h; this
// file is the driver: subscribing, following the stream, reconnecting (guest::Backoff), ending.
//
// Threading: Run() blocks its thread (reads the stream, renders, writes to `out`); Stop() may be
// called from any other thread. RunRemoteWatch wires the two to a Waiter (signals).
#ifndef TRACETORCH_CLI_REMOTE_WATCH_H_
#define TRACETORCH_CLI_REMOTE_WATCH_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "protocol/watch_state.h"
#include "service_client/watch_stream.h"
#include "tracetorch/v1/service.pb.h"
#include "view/live_view.h"
#include "view/terminal.h"
#include "view/watch.h"

namespace tracetorch::cli {

// Opens a Watch stream (TraceServiceClient::Watch, or a fake in tests). Never null.
using WatchOpener =
    std::function<std::unique_ptr<service_client::WatchStream>(const v1::WatchRequest& request)>;

struct RemoteWatchOptions {
  std::string address;  // Shown in the status line ("connected to ADDR").
  std::string session;  // A session id or "latest" (ignored with job_id).
  std::string job_id;   // Non-empty: watch every rank of this job.
  absl::Duration interval = absl::Milliseconds(500);  // Asked of the daemon.
  bool json = false;
  bool redraw_in_place = false;
  view::LiveViewOptions view;  // Style, filter; view.width is overridden by `terminal_size`.
  // Asked before every frame when redrawing in place (the terminal may have been resized).
  std::function<view::TerminalSize()> terminal_size;
  // How long the first connection may take (see the file comment).
  absl::Duration connect_timeout = absl::Seconds(3);
  // A session seen live that ends ABORTED is re-subscribed for this long before the watch calls
  // it the end: its agent may resume it (after a daemon restart, the restarted daemon reports it
  // aborted until the agent reconnects).
  absl::Duration resume_wait = absl::Seconds(10);
  // Between attempts to subscribe (guest::Backoff: doubling, jittered), from backoff_initial
  // again after every connection that delivered an update.
  absl::Duration backoff_initial = absl::Milliseconds(100);
  absl::Duration backoff_max = absl::Seconds(2);
  // What connect_timeout, resume_wait and the "last at" time are measured with.
  view::Clock clock = [] { return absl::Now(); };
};

// Converts what the daemon sends into the renderer's data (live_view.h).
view::SessionSummary SummaryFromProto(const v1::SessionInfo& info);

// True for a Watch stream's end that retrying cannot mend (bad credentials or request, a daemon
// without the call): the watch ends with it. Other ends (UNAVAILABLE, ...) are resubscribed.
bool IsFatalWatchError(absl::StatusCode code);
view::LayerHistoryMap HistoryFromProto(
    const google::protobuf::RepeatedPtrField<v1::LayerHistory>& h);

class RemoteWatcher {
 public:
  // `out` must outlive the watcher.
  RemoteWatcher(WatchOpener open, RemoteWatchOptions options, std::ostream* out);

  // Watches until the session ends (OK), Stop() (OK), or an error (see the file comment).
  absl::Status Run() ABSL_LOCKS_EXCLUDED(mu_);

  // Makes Run() return soon: cancels the open stream and wakes a backoff wait.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // The session id the watch resolved to ("" until the first update names it).
  std::string resolved_session() const ABSL_LOCKS_EXCLUDED(mu_);
  // Frames (or JSON lines) written so far.
  int writes() const { return writes_; }

 private:
  enum class StreamEnd { kEnded, kStopped, kInterrupted, kRetry, kFatal };

  absl::Status Watch() ABSL_LOCKS_EXCLUDED(mu_);  // Run() without the final newline.
  v1::WatchRequest MakeRequest() const ABSL_LOCKS_EXCLUDED(mu_);
  // Reads one stream to its end; `*status` is the error for kFatal.
  StreamEnd Follow(service_client::WatchStream* stream, bool* got_update, absl::Status* status);
  void Remember(const protocol::WatchState& state);
  void SetStatus(view::StatusLine::Kind kind, std::string text);
  void Draw();
  void Emit(const std::string& text);
  // Waits up to `timeout`; false when stopped.
  bool Sleep(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  const WatchOpener open_;
  const RemoteWatchOptions options_;
  std::ostream* const out_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  service_client::WatchStream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;  // The open stream, if any.
  std::string resolved_session_ ABSL_GUARDED_BY(mu_);

  // The run's own state (Run's thread only).
  view::StatusLine status_;
  uint64_t updates_ = 0;
  std::optional<absl::Time> updated_at_;
  std::optional<TraceRecord> record_;
  view::LayerHistoryMap history_;
  std::optional<view::SessionSummary> session_;
  std::optional<view::LiveJobFrame> job_;
  bool ended_ = false;
  bool saw_live_ = false;                    // The session was seen live in this watch.
  std::optional<absl::Time> aborted_since_;  // First seen aborted (see resume_wait).
  std::string last_frame_;
  view::InPlaceScreen screen_;
  int writes_ = 0;
};

// `tracetorch watch --remote [ADDR] [SESSION|latest]` and `watch --job JOB` as CLI11 parsed them.
// `--remote` takes an optional value, so CLI11 gives it the first word after it: that word is the
// address when it looks like one (a path with '/', "unix:...", "*.sock", "HOST:PORT"), else the
// session, e.g.
//   watch --remote                      default address, latest session
//   watch --remote latest               default address, latest session
//   watch --remote /run/x.sock 2026-1   that socket, session 2026-1
//   watch --remote 2026-1               default address, session 2026-1
struct RemoteWatchArgs {
  std::string remote_value;          // --remote's value ("" when given bare).
  std::vector<std::string> targets;  // The positional words.
  std::string job_id;                // --job.
  std::string default_address;       // protocol::DefaultServiceAddress().
};
struct RemoteWatchTarget {
  std::string address;
  std::string session = "latest";
  std::string job_id;
};
// InvalidArgument for too many words, or a session together with --job.
absl::StatusOr<RemoteWatchTarget> ResolveRemoteWatchTarget(const RemoteWatchArgs& args);

// True for an address-looking word (see RemoteWatchArgs).
bool LooksLikeServiceAddress(std::string_view word);

// Connects with service_client::ServiceClientOptionsFromEnv() (token, TLS) and runs the watch until
// it ends (RunRemoteWatch). `wait` must be made before this call when it blocks signals, so that
// the gRPC threads started here inherit the blocked mask. The error is one line for the user.
absl::Status RunRemoteWatchCommand(const RemoteWatchTarget& target, RemoteWatchOptions options,
                                   std::ostream* out, const view::Waiter& wait);

// Runs `watcher` on a thread of its own while this thread waits on `wait` in short slices: when
// `wait` returns false (SIGINT, SIGTERM) the watcher is stopped and the result is OK; otherwise
// the watcher's result.
absl::Status RunRemoteWatch(RemoteWatcher* watcher, const view::Waiter& wait);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_REMOTE_WATCH_H_
