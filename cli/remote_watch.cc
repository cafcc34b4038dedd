#include "cli/remote_watch.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "cli/daemon_connect.h"
#include "cli/json_output.h"
#include "cli/session_labels.h"
#include "guest/backoff.h"
#include "protocol/record_proto.h"
#include "service_client/service_client.h"
#include "view/labels.h"

namespace tracetorch::cli {

using ::tracetorch::view::GlyphString;
using ::tracetorch::view::LayerHistoryMap;
using ::tracetorch::view::LayerSeries;
using ::tracetorch::view::LiveFrame;
using ::tracetorch::view::LiveJobFrame;
using ::tracetorch::view::LiveViewOptions;
using ::tracetorch::view::RankView;
using ::tracetorch::view::RenderJobFrame;
using ::tracetorch::view::RenderLiveFrame;
using ::tracetorch::view::SessionSummary;
using ::tracetorch::view::StatusLine;
using ::tracetorch::view::Style;
using ::tracetorch::view::TerminalSize;
using ::tracetorch::view::Waiter;

bool IsFatalWatchError(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

SessionSummary SummaryFromProto(const v1::SessionInfo& info) {
  SessionSummary s;
  s.session_id = info.session_id();
  s.state = SessionStateName(info);
  s.position = FlightText(info, absl::GetCurrentTimeNanos());
  s.events = info.events();
  s.dropped_events = info.dropped_events();
  s.rejected_events = info.rejected_events();
  s.pid = info.identity().pid();
  s.host = info.identity().host();
  if (info.identity().has_rank()) s.rank = info.identity().rank();
  s.job_id = info.identity().job_id();
  return s;
}

LayerHistoryMap HistoryFromProto(
    const google::protobuf::RepeatedPtrField<v1::LayerHistory>& history) {
  LayerHistoryMap out;
  out.reserve(static_cast<size_t>(history.size()));
  for (const v1::LayerHistory& h : history) {
    LayerSeries& series = out[h.full_name()];
    series.latency_ms.assign(h.latency_ms().begin(), h.latency_ms().end());
    series.output_std.assign(h.output_std().begin(), h.output_std().end());
    series.grad_norm.assign(h.grad_norm().begin(), h.grad_norm().end());
    series.non_finite.assign(h.non_finite().begin(), h.non_finite().end());
  }
  return out;
}

RemoteWatcher::RemoteWatcher(WatchOpener open, RemoteWatchOptions options, std::ostream* out)
    : open_(std::move(open)), options_(std::move(options)), out_(out) {}

void RemoteWatcher::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  if (stream_ != nullptr) stream_->Cancel();
}

std::string RemoteWatcher::resolved_session() const {
  absl::MutexLock lock(&mu_);
  return resolved_session_;
}

v1::WatchRequest RemoteWatcher::MakeRequest() const {
  v1::WatchRequest request;
  request.set_interval_s(absl::ToDoubleSeconds(options_.interval));
  if (!options_.job_id.empty()) {
    request.set_job_id(options_.job_id);
    return request;
  }
  absl::MutexLock lock(&mu_);
  request.mutable_session()->set_session_id(resolved_session_.empty() ? options_.session
                                                                      : resolved_session_);
  return request;
}

bool RemoteWatcher::Sleep(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), timeout);
  return !stopping_;
}

void RemoteWatcher::SetStatus(StatusLine::Kind kind, std::string text) {
  status_.kind = kind;
  status_.text = std::move(text);
}

void RemoteWatcher::Remember(const protocol::WatchState& state) {
  if (state.has_job()) {
    const v1::JobSnapshot& job = state.job();
    LiveJobFrame frame;
    frame.job_id = job.job_id();
    for (int i = 0; i < job.ranks_size(); ++i) {
      const v1::Snapshot& snap = job.ranks(i);
      RankView rank;
      rank.rank = snap.session().identity().has_rank() ? snap.session().identity().rank() : i;
      rank.session = SummaryFromProto(snap.session());
      rank.record = FromProto(snap.record());
      frame.ranks.push_back(std::move(rank));
    }
    for (const v1::Anomaly& d : job.divergences()) frame.divergences.push_back(FromProto(d));
    job_ = std::move(frame);
    return;
  }
  if (!state.has_snapshot()) return;
  const v1::Snapshot& snap = state.snapshot();
  record_ = FromProto(snap.record());
  history_ = HistoryFromProto(snap.history());
  session_ = SummaryFromProto(state.ended().has_value() ? *state.ended() : snap.session());
  if (!snap.session().session_id().empty()) {
    absl::MutexLock lock(&mu_);
    resolved_session_ = snap.session().session_id();
  }
}

void RemoteWatcher::Emit(const std::string& text) {
  *out_ << text;
  out_->flush();
  ++writes_;
}

void RemoteWatcher::Draw() {
  if (options_.json) return;
  const Style& style = options_.view.style;
  TerminalSize size;
  if (options_.redraw_in_place && options_.terminal_size) size = options_.terminal_size();
  LiveViewOptions view = options_.view;
  if (options_.redraw_in_place) view.width = size.columns;

  std::string frame;
  if (job_.has_value() || !options_.job_id.empty()) {
    LiveJobFrame job = job_.has_value() ? *job_ : LiveJobFrame{};
    if (job.job_id.empty()) job.job_id = options_.job_id;
    job.address = options_.address;
    job.status = status_;
    job.updates = updates_;
    job.updated_at = updated_at_;
    frame = RenderJobFrame(job, view);
  } else {
    LiveFrame live;
    {
      absl::MutexLock lock(&mu_);
      live.target = resolved_session_.empty() ? absl::StrCat("session ", options_.session)
                                              : absl::StrCat("session ", resolved_session_);
    }
    live.address = options_.address;
    live.status = status_;
    live.session = session_;
    live.updates = updates_;
    live.updated_at = updated_at_;
    live.record = record_.has_value() ? &*record_ : nullptr;
    live.history = &history_;
    frame = RenderLiveFrame(live, view);
  }
  if (frame == last_frame_) return;
  last_frame_ = frame;

  if (!options_.redraw_in_place) {
    Emit(writes_ > 0 ? absl::StrCat("\n", frame) : frame);
    return;
  }
  Emit(screen_.Draw(frame, size, style));
}

RemoteWatcher::StreamEnd RemoteWatcher::Follow(service_client::WatchStream* stream,
                                               bool* got_update, absl::Status* status) {
  protocol::WatchState state;
  v1::WatchUpdate update;
  bool shutdown = false;
  bool interrupted = false;
  while (stream->Read(&update)) {
    if (absl::Status s = state.Apply(update); !s.ok()) {
      // A stream that breaks the protocol: drop it and subscribe again.
      stream->Cancel();
      while (stream->Read(&update)) {
      }
      (void)stream->Finish();
      *status = s;
      return StreamEnd::kRetry;
    }
    if (!*got_update) {
      const bool reconnect = updates_ > 0;
      *got_update = true;
      SetStatus(StatusLine::Kind::kOk,
                absl::StrCat(reconnect ? "reconnected to " : "connected to ", options_.address));
      if (options_.json && reconnect) Emit(WatchStatusToJson("connected", status_.text) + "\n");
    }
    ++updates_;
    const absl::Time now = options_.clock();
    updated_at_ = now;
    Remember(state);
    if (update.has_full() && update.full().session().state() == v1::SESSION_STATE_LIVE) {
      if (aborted_since_.has_value()) {
        SetStatus(StatusLine::Kind::kOk,
                  absl::StrCat("session resumed; connected to ", options_.address));
      }
      saw_live_ = true;
      aborted_since_.reset();
    }
    bool held_back = false;
    if (update.has_session_ended()) {
      const bool aborted = update.session_ended().state() == v1::SESSION_STATE_ABORTED;
      // A session seen live that ends aborted may only be waiting for its agent to resume it
      // (the daemon restarted): give the agent resume_wait before calling it the end.
      if (aborted && saw_live_ && options_.job_id.empty()) {
        if (!aborted_since_.has_value()) aborted_since_ = now;
        held_back = now - *aborted_since_ < options_.resume_wait;
      }
      if (held_back) {
        interrupted = true;
        SetStatus(
            StatusLine::Kind::kWaiting,
            GlyphString(options_.view.style,
                        "session interrupted: the traced process disconnected — waiting for it to "
                        "resume…",
                        "session interrupted: the traced process disconnected - waiting for it to "
                        "resume..."));
      } else {
        ended_ = true;
        if (aborted) {
          SetStatus(StatusLine::Kind::kProblem,
                    "session aborted (the traced process went away without ending it)");
        } else {
          SetStatus(StatusLine::Kind::kDone, "session finished");
        }
      }
    }
    if (update.has_shutdown()) {
      shutdown = true;
      SetStatus(StatusLine::Kind::kWaiting,
                GlyphString(options_.view.style, "daemon is stopping — reconnecting…",
                            "daemon is stopping - reconnecting..."));
    }
    if (!options_.json) {
      Draw();
    } else if (held_back) {
      Emit(WatchStatusToJson("interrupted", status_.text) + "\n");
    } else {
      Emit(WatchUpdateToJson(update, state, options_.view.filter) + "\n");
    }
  }
  const absl::Status finish = stream->Finish();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return StreamEnd::kStopped;
  }
  if (ended_) return StreamEnd::kEnded;
  if (interrupted) return StreamEnd::kInterrupted;
  if (IsFatalWatchError(finish.code())) {
    *status = finish;
    return StreamEnd::kFatal;
  }
  if (finish.ok()) {
    *status = absl::UnavailableError(shutdown ? "the daemon is stopping"
                                              : "the daemon closed the stream");
  } else {
    *status = finish;
  }
  return StreamEnd::kRetry;
}

absl::Status RemoteWatcher::Run() {
  const absl::Status status = Watch();
  // Leave the cursor below an in-place frame, so what follows (a shell prompt) starts afresh.
  if (const std::string leave = screen_.Leave(); !leave.empty()) {
    *out_ << leave;
    out_->flush();
  }
  return status;
}

absl::Status RemoteWatcher::Watch() {
  const absl::Time start = options_.clock();
  guest::Backoff backoff({.initial = options_.backoff_initial, .max = options_.backoff_max});
  bool connected_once = false;
  SetStatus(StatusLine::Kind::kWaiting, absl::StrCat("connecting to ", options_.address));
  while (true) {
    std::unique_ptr<service_client::WatchStream> stream = open_(MakeRequest());
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return absl::OkStatus();
      stream_ = stream.get();
    }
    bool got_update = false;
    absl::Status error;
    const StreamEnd end = Follow(stream.get(), &got_update, &error);
    {
      absl::MutexLock lock(&mu_);
      stream_ = nullptr;
    }
    stream.reset();
    switch (end) {
      case StreamEnd::kEnded:
      case StreamEnd::kStopped:
        return absl::OkStatus();
      case StreamEnd::kFatal:
        return absl::Status(error.code(), absl::StrCat("tracetorchd at ", options_.address, ": ",
                                                       absl::StatusCodeToString(error.code()), ": ",
                                                       error.message()));
      case StreamEnd::kInterrupted:
        // Ask again after a while (the backoff keeps growing: the agent needs seconds).
        if (!Sleep(backoff.Next())) return absl::OkStatus();
        continue;
      case StreamEnd::kRetry:
        break;
    }
    if (got_update) {
      connected_once = true;
      backoff.Reset();
    }
    if (!connected_once) {
      if (options_.clock() - start >= options_.connect_timeout) {
        const std::string what = options_.job_id.empty()
                                     ? absl::StrCat("session '", options_.session, "'")
                                     : absl::StrCat("job '", options_.job_id, "'");
        if (error.code() == absl::StatusCode::kNotFound) {
          return absl::NotFoundError(absl::StrCat("unknown ", what, " on tracetorchd at ",
                                                  options_.address,
                                                  " (see 'tracetorch sessions')"));
        }
        return absl::Status(error.code(), CannotReachDaemon(options_.address, error.message()));
      }
    } else if (got_update) {
      // A new outage: keep the last state on screen and say so (once; the shutdown update may
      // have said it already).
      if (status_.kind != StatusLine::Kind::kWaiting) {
        SetStatus(StatusLine::Kind::kWaiting,
                  GlyphString(options_.view.style, "daemon went away — reconnecting…",
                              "daemon went away - reconnecting..."));
      }
      if (options_.json) {
        Emit(WatchStatusToJson("reconnecting", error.ToString()) + "\n");
      } else {
        Draw();
      }
    }
    if (!Sleep(backoff.Next())) return absl::OkStatus();
  }
}

absl::Status RunRemoteWatch(RemoteWatcher* watcher, const Waiter& wait) {
  absl::Status result;
  absl::Notification done;
  std::thread reader([watcher, &result, &done] {
    result = watcher->Run();
    done.Notify();
  });
  bool stopped = false;
  while (!done.HasBeenNotified()) {
    if (!wait(absl::Milliseconds(100))) {
      watcher->Stop();
      stopped = true;
      break;
    }
  }
  reader.join();
  return stopped ? absl::OkStatus() : result;
}

bool LooksLikeServiceAddress(std::string_view word) {
  if (word.find('/') != std::string_view::npos) return true;
  if (word.substr(0, 5) == "unix:") return true;
  if (word.size() > 5 && word.substr(word.size() - 5) == ".sock") return true;
  const size_t colon = word.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == word.size()) return false;
  const std::string_view port = word.substr(colon + 1);
  return std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
}

absl::StatusOr<RemoteWatchTarget> ResolveRemoteWatchTarget(const RemoteWatchArgs& args) {
  std::vector<std::string> words;
  if (!args.remote_value.empty()) words.push_back(args.remote_value);
  words.insert(words.end(), args.targets.begin(), args.targets.end());
  RemoteWatchTarget target;
  target.address = args.default_address;
  target.job_id = args.job_id;
  size_t next = 0;
  if (next < words.size() && LooksLikeServiceAddress(words[next])) target.address = words[next++];
  if (next < words.size()) {
    if (!args.job_id.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("watch --job takes no session ('", words[next],
                                                     "'): it watches every rank of the job"));
    }
    target.session = words[next++];
  }
  if (next < words.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("watch --remote takes at most an address and a session, got '", words[next],
                     "' too (see 'tracetorch watch --help')"));
  }
  if (target.session.empty()) {
    return absl::InvalidArgumentError("SESSION must not be empty (an id or 'latest')");
  }
  return target;
}

absl::Status RunRemoteWatchCommand(const RemoteWatchTarget& target, RemoteWatchOptions options,
                                   std::ostream* out, const Waiter& wait) {
  absl::StatusOr<service_client::ServiceClientOptions> client_options =
      service_client::ServiceClientOptionsFromEnv();
  if (!client_options.ok()) return client_options.status();
  absl::StatusOr<std::unique_ptr<service_client::TraceServiceClient>> client =
      service_client::TraceServiceClient::Create(target.address, *client_options);
  if (!client.ok()) return client.status();
  options.address = target.address;
  options.session = target.session;
  options.job_id = target.job_id;
  service_client::TraceServiceClient* rpc = client->get();
  RemoteWatcher watcher([rpc](const v1::WatchRequest& request) { return rpc->Watch(request); },
                        std::move(options), out);
  return RunRemoteWatch(&watcher, wait);
}

}  // namespace tracetorch::cli
