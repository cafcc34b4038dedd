#include "cli/multi_job_watch.h"

#include <algorithm>
#include <map>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "cli/remote_watch.h"
#include "guest/backoff.h"
#include "protocol/job_divergence.h"
#include "protocol/record_proto.h"
#include "service_client/service_client.h"

namespace tracetorch::cli {

using ::tracetorch::view::GlyphString;
using ::tracetorch::view::LiveJobFrame;
using ::tracetorch::view::LiveViewOptions;
using ::tracetorch::view::RankView;
using ::tracetorch::view::RenderJobFrame;
using ::tracetorch::view::StatusLine;
using ::tracetorch::view::Style;
using ::tracetorch::view::TerminalSize;
using ::tracetorch::view::Waiter;
std::vector<std::string> SplitRemoteAddresses(std::string_view value) {
  std::vector<std::string> out;
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(value.data(), value.size()), ',', absl::SkipEmpty())) {
    out.emplace_back(part);
  }
  return out;
}

v1::JobSnapshot MergeJobParts(std::string_view job_id, const std::vector<DaemonJobPart>& parts,
                              std::vector<std::string>* rank_daemons,
                              const DivergenceThresholds& thresholds) {
  struct Pick {
    const v1::Snapshot* snapshot;
    const std::string* address;
  };
  std::map<int32_t, Pick> by_rank;
  std::vector<Pick> without_rank;
  for (const DaemonJobPart& part : parts) {
    if (!part.job.has_value()) continue;
    for (const v1::Snapshot& s : part.job->ranks()) {
      const v1::SessionInfo& info = s.session();
      if (!info.identity().has_rank()) {
        without_rank.push_back({&s, &part.address});
        continue;
      }
      auto [it, inserted] = by_rank.emplace(info.identity().rank(), Pick{&s, &part.address});
      if (!inserted && info.started_unix_ns() >= it->second.snapshot->session().started_unix_ns()) {
        it->second = {&s, &part.address};
      }
    }
  }
  std::stable_sort(without_rank.begin(), without_rank.end(), [](const Pick& a, const Pick& b) {
    return a.snapshot->session().started_unix_ns() < b.snapshot->session().started_unix_ns();
  });
  std::vector<Pick> chosen;
  for (const auto& [rank, pick] : by_rank) chosen.push_back(pick);
  chosen.insert(chosen.end(), without_rank.begin(), without_rank.end());

  v1::JobSnapshot job;
  job.set_job_id(std::string(job_id));
  if (rank_daemons != nullptr) rank_daemons->clear();
  for (const Pick& pick : chosen) {
    *job.add_ranks() = *pick.snapshot;
    if (rank_daemons != nullptr) rank_daemons->push_back(*pick.address);
  }
  // As the daemon's own job view (daemon/core/job.cc) computes it, so that findings read the same.
  protocol::AddRankDivergences(thresholds, &job);
  return job;
}

MultiJobWatcher::MultiJobWatcher(DaemonWatchOpener open, MultiJobWatchOptions options,
                                 std::ostream* out)
    : open_(std::move(open)), options_(std::move(options)), out_(out) {
  absl::MutexLock lock(&mu_);
  daemons_.resize(options_.addresses.size());
}

MultiJobWatcher::~MultiJobWatcher() { Stop(); }

void MultiJobWatcher::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  ++version_;
  for (Daemon& d : daemons_) {
    if (d.stream != nullptr) d.stream->Cancel();
  }
}

void MultiJobWatcher::SetLink(size_t daemon, Link link, std::string message,
                              absl::StatusCode failure) {
  absl::MutexLock lock(&mu_);
  daemons_[daemon].link = link;
  daemons_[daemon].message = std::move(message);
  daemons_[daemon].failure = failure;
  ++version_;
}

void MultiJobWatcher::Follow(size_t daemon) {
  guest::Backoff backoff({.initial = options_.backoff_initial, .max = options_.backoff_max});
  v1::WatchRequest request;
  request.set_job_id(options_.job_id);
  request.set_interval_s(absl::ToDoubleSeconds(options_.interval));
  while (true) {
    std::unique_ptr<service_client::WatchStream> stream = open_(daemon, request);
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      daemons_[daemon].stream = stream.get();
    }
    bool got_update = false;
    bool ended = false;
    bool shutdown = false;
    v1::WatchUpdate update;
    while (stream->Read(&update)) {
      absl::MutexLock lock(&mu_);
      Daemon& d = daemons_[daemon];
      if (update.has_job()) {
        d.job = update.job();
        d.link = Link::kConnected;
        d.message.clear();
        got_update = true;
      }
      if (update.has_session_ended()) {
        ended = true;
        d.link = Link::kEnded;
      }
      if (update.has_shutdown()) shutdown = true;
      ++version_;
    }
    const absl::Status finish = stream->Finish();
    {
      absl::MutexLock lock(&mu_);
      daemons_[daemon].stream = nullptr;
      if (stopping_) return;
    }
    if (ended) return;
    if (IsFatalWatchError(finish.code())) {
      SetLink(daemon, Link::kFailed, std::string(finish.message()), finish.code());
      return;
    }
    if (got_update) backoff.Reset();
    if (absl::IsNotFound(finish)) {
      SetLink(daemon, Link::kNoRanks, "no rank of the job on this daemon (yet)");
    } else {
      SetLink(daemon, Link::kAway,
              shutdown
                  ? "the daemon is stopping"
                  : (finish.ok() ? "the daemon closed the stream" : std::string(finish.message())));
    }
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), backoff.Next())) return;
  }
}

bool MultiJobWatcher::DoneLocked(absl::Status* status) const {
  for (size_t i = 0; i < daemons_.size(); ++i) {
    if (daemons_[i].link == Link::kFailed) {
      *status = absl::Status(
          daemons_[i].failure,
          absl::StrCat("tracetorchd at ", options_.addresses[i], ": ", daemons_[i].message));
      return true;
    }
  }
  bool any_ended = false;
  for (const Daemon& d : daemons_) {
    if (d.link == Link::kEnded) {
      any_ended = true;
    } else if (d.link != Link::kNoRanks) {
      return false;  // Connecting, connected, away: it may still deliver ranks.
    }
  }
  return any_ended;
}

void MultiJobWatcher::Emit(const std::string& text) {
  *out_ << text;
  out_->flush();
}

const Style& MultiJobWatcher::view_style() const { return options_.view.style; }

void MultiJobWatcher::Draw(const std::vector<DaemonJobPart>& parts,
                           const std::vector<Daemon>& daemons, bool ended) {
  std::vector<std::string> rank_daemons;
  const v1::JobSnapshot job = MergeJobParts(options_.job_id, parts, &rank_daemons);
  ++sequence_;
  static constexpr const char* kLinkNames[] = {"connecting", "connected", "no_ranks",
                                               "away",       "ended",     "failed"};
  if (options_.json) {
    std::vector<DaemonLinkJson> links;
    for (size_t i = 0; i < daemons.size(); ++i) {
      DaemonLinkJson l{options_.addresses[i],
                       kLinkNames[static_cast<int>(daemons[i].link)],
                       daemons[i].message,
                       {}};
      if (daemons[i].job.has_value()) {
        for (const v1::Snapshot& s : daemons[i].job->ranks()) {
          if (s.session().identity().has_rank()) l.ranks.push_back(s.session().identity().rank());
        }
      }
      links.push_back(std::move(l));
    }
    Emit(MergedJobToJson(job, rank_daemons, links, sequence_, ended, options_.view.filter) + "\n");
    return;
  }

  LiveJobFrame frame;
  frame.job_id = options_.job_id;
  frame.address = absl::StrJoin(options_.addresses, ", ");
  std::vector<std::string> problems;
  size_t connected = 0;
  for (size_t i = 0; i < daemons.size(); ++i) {
    if (daemons[i].link == Link::kConnected || daemons[i].link == Link::kEnded) {
      ++connected;
      continue;
    }
    problems.push_back(absl::StrCat(options_.addresses[i], " ",
                                    kLinkNames[static_cast<int>(daemons[i].link)],
                                    daemons[i].message.empty() ? "" : ": ", daemons[i].message));
  }
  frame.status.kind = ended              ? StatusLine::Kind::kDone
                      : problems.empty() ? StatusLine::Kind::kOk
                                         : StatusLine::Kind::kWaiting;
  frame.status.text = absl::StrCat(ended ? "job ended; " : "", connected, " of ", daemons.size(),
                                   " daemons connected (", frame.address, ")",
                                   problems.empty() ? "" : GlyphString(view_style(), " — ", " - "),
                                   absl::StrJoin(problems, "; "));
  frame.updates = sequence_;
  frame.updated_at = absl::Now();
  for (int i = 0; i < job.ranks_size(); ++i) {
    const v1::Snapshot& snap = job.ranks(i);
    RankView rank;
    rank.rank = snap.session().identity().has_rank() ? snap.session().identity().rank() : i;
    rank.session = SummaryFromProto(snap.session());
    rank.record = FromProto(snap.record());
    frame.ranks.push_back(std::move(rank));
  }
  for (const v1::Anomaly& d : job.divergences()) frame.divergences.push_back(FromProto(d));

  TerminalSize size;
  if (options_.redraw_in_place && options_.terminal_size) size = options_.terminal_size();
  LiveViewOptions view = options_.view;
  if (options_.redraw_in_place) view.width = size.columns;
  const std::string text = RenderJobFrame(frame, view);
  if (text == last_frame_) return;
  last_frame_ = text;
  if (!options_.redraw_in_place) {
    Emit(sequence_ > 1 ? absl::StrCat("\n", text) : text);
    return;
  }
  Emit(screen_.Draw(text, size, view.style));
}

absl::Status MultiJobWatcher::Run() {
  if (options_.addresses.empty()) return absl::InvalidArgumentError("no daemon address");
  std::vector<std::thread> readers;
  for (size_t i = 0; i < options_.addresses.size(); ++i) {
    readers.emplace_back([this, i] { Follow(i); });
  }
  absl::Status result;
  uint64_t seen = 0;
  bool first = true;
  while (true) {
    std::vector<DaemonJobPart> parts;
    std::vector<Daemon> daemons;
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      if (!first) {
        auto changed = [this, &seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || version_ != seen;
        };
        mu_.Await(absl::Condition(&changed));
      }
      first = false;
      seen = version_;
      if (stopping_) break;
      done = DoneLocked(&result);
      daemons = daemons_;
      for (size_t i = 0; i < daemons_.size(); ++i) {
        parts.push_back({options_.addresses[i], daemons_[i].job});
      }
    }
    if (result.ok()) Draw(parts, daemons, done);
    if (done) break;
  }
  Stop();
  for (std::thread& t : readers) t.join();
  if (const std::string leave = screen_.Leave(); !leave.empty()) Emit(leave);
  return result;
}

absl::Status RunMultiJobWatchCommand(MultiJobWatchOptions options, std::ostream* out,
                                     const Waiter& wait) {
  absl::StatusOr<service_client::ServiceClientOptions> client_options =
      service_client::ServiceClientOptionsFromEnv();
  if (!client_options.ok()) return client_options.status();
  std::vector<std::unique_ptr<service_client::TraceServiceClient>> clients;
  for (const std::string& address : options.addresses) {
    absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> client =
        service_client::TraceServiceClient::Create(address, *client_options);
    if (!client.ok()) {
      return absl::Status(client.status().code(),
                          absl::StrCat(address, ": ", client.status().message()));
    }
    clients.push_back(*std::move(client));
  }
  MultiJobWatcher watcher(
      [&clients](size_t daemon, const v1::WatchRequest& request) {
        return clients[daemon]->Watch(request);
      },
      std::move(options), out);
  absl::Status result;
  absl::Notification done;
  std::thread runner([&] {
    result = watcher.Run();
    done.Notify();
  });
  while (!done.HasBeenNotified()) {
    if (!wait(absl::Milliseconds(100))) {
      watcher.Stop();
      break;
    }
  }
  runner.join();
  return result;
}

}  // namespace tracetorch::cli
