// `tracetorch watch --job JOB --remote A,B,...`: one job whose ranks stream to several daemons
// (one per node), shown as one job. A reader thread per daemon follows that daemon's job watch
// (TraceService.Watch with job_id: its ranks of the job, whole, at every update) and resubscribes
// with backoff when the daemon goes away; every change redraws the merged view: the union of the
// daemons' ranks side by side, with the cross-rank divergence computed over all of them by
// DetectRankDivergence (trace/divergence.h), the code each daemon runs for its own ranks.
//
//  - A daemon that goes away keeps its last ranks in the view and is listed as away (status line,
//    JSON "daemons"); the others keep updating. A daemon without ranks of the job (yet) is
//    retried until it has some.
//  - The watch ends (Run returns OK) once every daemon has reported the job's end and no daemon
//    is away, or at Stop().
//  - Errors: Unauthenticated, PermissionDenied, InvalidArgument and Unimplemented from a daemon
//    end the watch at once (Run returns that code, the message naming the daemon); nothing else
//    does.
//  - --json: one MergedJobToJson document (cli/json_output.h) per change, one per line.
//
// Threading: Run() blocks its thread (renders and writes to `out`) and owns the reader threads;
// Stop() may be called from any other thread.
#ifndef TRACETORCH_CLI_MULTI_JOB_WATCH_H_
#define TRACETORCH_CLI_MULTI_JOB_WATCH_H_

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
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cli/json_output.h"
#include "service_client/watch_stream.h"
#include "trace/divergence.h"
#include "tracetorch/v1/service.pb.h"
#include "view/live_view.h"
#include "view/terminal.h"
#include "view/watch.h"

namespace tracetorch::cli {

// "A,B,C" -> {"A", "B", "C"} (empty items dropped); one address -> {address}.
std::vector<std::string> SplitRemoteAddresses(std::string_view value);

// The latest job state of one daemon, as MergeJobParts takes it.
struct DaemonJobPart {
  std::string address;
  std::optional<v1::JobSnapshot> job;  // None before the daemon sent one.
};

// The job over several daemons: per rank the most recently started session over all parts
// (then the sessions without a rank, by start), ordered by rank, and the divergences computed by
// DetectRankDivergence over them with `thresholds`. `rank_daemons`, when given, gets the address
// each merged rank came from.
v1::JobSnapshot MergeJobParts(std::string_view job_id, const std::vector<DaemonJobPart>& parts,
                              std::vector<std::string>* rank_daemons = nullptr,
                              const DivergenceThresholds& thresholds = {});

// Opens the Watch stream of daemon `daemon` (an index into the addresses). Never null.
using DaemonWatchOpener = std::function<std::unique_ptr<service_client::WatchStream>(
    size_t daemon, const v1::WatchRequest& request)>;

struct MultiJobWatchOptions {
  std::vector<std::string> addresses;  // As given; shown in the view and the JSON.
  std::string job_id;
  absl::Duration interval = absl::Milliseconds(500);  // Asked of each daemon.
  bool json = false;
  bool redraw_in_place = false;
  view::LiveViewOptions view;
  std::function<view::TerminalSize()> terminal_size;
  absl::Duration backoff_initial = absl::Milliseconds(100);
  absl::Duration backoff_max = absl::Seconds(2);
};

class MultiJobWatcher {
 public:
  // `out` must outlive the watcher.
  MultiJobWatcher(DaemonWatchOpener open, MultiJobWatchOptions options, std::ostream* out);
  ~MultiJobWatcher();

  absl::Status Run() ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class Link { kConnecting, kConnected, kNoRanks, kAway, kEnded, kFailed };
  struct Daemon {
    Link link = Link::kConnecting;
    std::string message;
    absl::StatusCode failure = absl::StatusCode::kOk;  // With kFailed: the daemon's status code.
    std::optional<v1::JobSnapshot> job;
    service_client::WatchStream* stream = nullptr;  // The open stream, if any.
  };

  void Follow(size_t daemon) ABSL_LOCKS_EXCLUDED(mu_);
  void SetLink(size_t daemon, Link link, std::string message,
               absl::StatusCode failure = absl::StatusCode::kOk) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the watch is over (every daemon ended, or one failed); `*status` for a failure.
  bool DoneLocked(absl::Status* status) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Draw(const std::vector<DaemonJobPart>& parts, const std::vector<Daemon>& daemons,
            bool ended);
  void Emit(const std::string& text);
  const view::Style& view_style() const;

  const DaemonWatchOpener open_;
  const MultiJobWatchOptions options_;
  std::ostream* const out_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // Bumped at every change.
  std::vector<Daemon> daemons_ ABSL_GUARDED_BY(mu_);

  // Run's thread only.
  uint64_t sequence_ = 0;
  std::string last_frame_;
  view::InPlaceScreen screen_;
};

// Connects to each of options.addresses (the agents' socket stands for the service socket beside
// it; token and TLS from the environment) and runs a MultiJobWatcher until it ends or `wait`
// returns false (then OK). `wait` must be made before this call when it blocks signals. The
// error is one line for the user.
absl::Status RunMultiJobWatchCommand(MultiJobWatchOptions options, std::ostream* out,
                                     const view::Waiter& wait);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_MULTI_JOB_WATCH_H_
