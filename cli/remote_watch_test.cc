#include "cli/remote_watch.h"

#include <deque>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "cli/fake_watch_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "protocol/record_proto.h"

namespace tracetorch::cli {

using ::tracetorch::view::DisplayWidth;
using ::tracetorch::view::Style;
using ::tracetorch::view::TerminalSize;
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// The watch's clock in tests: moves only when told to.
class FakeClock {
 public:
  absl::Time Now() {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1767225600);
};

using test_util::FakeStream;

// Hands out scripted streams in order (the last one again when they run out) and records the
// requests. With a clock, each stream opened moves it on by `per_open` (time the watch spends
// per attempt).
class FakeDaemon {
 public:
  FakeDaemon() = default;
  FakeDaemon(FakeClock* clock, absl::Duration per_open) : clock_(clock), per_open_(per_open) {}

  void Add(std::vector<v1::WatchUpdate> updates, absl::Status finish = absl::OkStatus(),
           bool block_at_end = false) {
    absl::MutexLock lock(&mu_);
    scripts_.push_back(Script{std::move(updates), std::move(finish), block_at_end});
  }
  WatchOpener Opener() {
    return [this](const v1::WatchRequest& request) -> std::unique_ptr<service_client::WatchStream> {
      if (clock_ != nullptr) clock_->Advance(per_open_);
      absl::MutexLock lock(&mu_);
      requests_.push_back(request);
      Script script = scripts_.front();
      if (scripts_.size() > 1) scripts_.pop_front();
      return std::make_unique<FakeStream>(script.updates, script.finish, script.block_at_end,
                                          &blocked_);
    };
  }
  // Notified when a stream blocks at its end (see FakeStream).
  absl::Notification& blocked() { return blocked_; }
  std::vector<v1::WatchRequest> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  struct Script {
    std::vector<v1::WatchUpdate> updates;
    absl::Status finish;
    bool block_at_end;
  };
  FakeClock* const clock_ = nullptr;
  const absl::Duration per_open_ = absl::ZeroDuration();
  absl::Notification blocked_;
  absl::Mutex mu_;
  std::deque<Script> scripts_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::WatchRequest> requests_ ABSL_GUARDED_BY(mu_);
};

v1::LayerTrace ProtoLayer(const std::string& full_name, double latency) {
  LayerTrace layer;
  layer.full_name = full_name;
  layer.name = full_name.substr(full_name.rfind('.') + 1);
  layer.type = "Linear";
  layer.latency_ms = latency;
  layer.latency_ms_mean = latency;
  layer.forward_count = 3;
  layer.grad_norm = 0.25;
  v1::LayerTrace out;
  ToProto(layer, &out);
  return out;
}

v1::SessionInfo Session(const std::string& id, v1::SessionState state, uint64_t events) {
  v1::SessionInfo info;
  info.set_session_id(id);
  info.set_state(state);
  info.set_events(events);
  info.set_dropped_events(2);
  info.mutable_identity()->set_pid(4242);
  info.mutable_identity()->set_host("box");
  return info;
}

v1::WatchUpdate Full(uint64_t sequence, const std::string& id, uint64_t events) {
  v1::WatchUpdate update;
  update.set_sequence(sequence);
  v1::Snapshot* full = update.mutable_full();
  *full->mutable_session() = Session(id, v1::SESSION_STATE_LIVE, events);
  full->mutable_record()->mutable_metadata()->set_model_name("TrainNet");
  *full->mutable_record()->add_layers() = ProtoLayer("enc.fc", 0.5);
  *full->mutable_record()->add_layers() = ProtoLayer("head", 0.25);
  v1::LayerHistory* h = full->add_history();
  h->set_full_name("enc.fc");
  for (int i = 0; i < 4; ++i) {
    h->add_steps(i);
    h->add_latency_ms(0.1 * (i + 1));
    h->add_output_std(1.0);
    h->add_grad_norm(1.0 / (i + 1));
    h->add_non_finite(false);
  }
  return update;
}

v1::WatchUpdate NanDelta(uint64_t sequence, const std::string& id) {
  v1::WatchUpdate update;
  update.set_sequence(sequence);
  v1::Snapshot* delta = update.mutable_delta();
  *delta->mutable_session() = Session(id, v1::SESSION_STATE_LIVE, 99);
  v1::TraceMetadata* meta = delta->mutable_record()->mutable_metadata();
  meta->set_model_name("TrainNet");
  meta->mutable_nan_origin()->set_layer("enc.fc");
  meta->mutable_nan_origin()->set_step(3);
  meta->mutable_nan_origin()->set_is_nan(true);
  v1::Anomaly* a = delta->mutable_record()->add_warnings();
  a->set_type(v1::ANOMALY_TYPE_NAN_ACTIVATION);
  a->set_severity(v1::SEVERITY_CRITICAL);
  a->set_layer("enc.fc");
  a->set_message("NaN detected in output");
  return update;
}

v1::WatchUpdate Ended(uint64_t sequence, const std::string& id, v1::SessionState state) {
  v1::WatchUpdate update;
  update.set_sequence(sequence);
  *update.mutable_session_ended() = Session(id, state, 100);
  return update;
}

RemoteWatchOptions Options() {
  RemoteWatchOptions options;
  options.address = "unix:/tmp/rpc.sock";
  options.session = "latest";
  options.connect_timeout = absl::Milliseconds(300);
  options.backoff_initial = absl::Milliseconds(5);
  options.backoff_max = absl::Milliseconds(20);
  return options;
}

TEST(RemoteWatcher, PipedFramesThenFinalStateAtSessionEnd) {
  FakeDaemon daemon;
  daemon.Add({Full(1, "s-1", 10), NanDelta(2, "s-1"), Ended(3, "s-1", v1::SESSION_STATE_FINISHED)});
  std::ostringstream out;
  RemoteWatcher watcher(daemon.Opener(), Options(), &out);
  ASSERT_TRUE(watcher.Run().ok());
  const std::string text = out.str();
  EXPECT_EQ(watcher.writes(), 3);
  EXPECT_THAT(text, StartsWith("tracetorch watch - session s-1 - TrainNet - pid 4242 on box"));
  EXPECT_THAT(text, HasSubstr("\nconnected to unix:/tmp/rpc.sock\n"));
  EXPECT_THAT(text, HasSubstr("events 10 - dropped 2 - rejected 0 - updates 1"));
  EXPECT_THAT(text, HasSubstr("!! NaN origin: enc.fc at step 3 (first NaN)"));
  EXPECT_THAT(text, HasSubstr("lat   0.500ms _-*@"));  // The history's sparkline.
  // Frames are appended with a blank line between them; the last one is the final state.
  const std::vector<std::string> frames = absl::StrSplit(text, "\n\ntracetorch watch - ");
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_THAT(frames[2], HasSubstr("\nsession finished\n"));
  EXPECT_THAT(frames[2], HasSubstr("events 100 - dropped 2"));
  EXPECT_THAT(frames[2], HasSubstr("NaN origin: enc.fc"));
  EXPECT_THAT(text, Not(HasSubstr("\x1b")));
  ASSERT_EQ(daemon.requests().size(), 1u);
  EXPECT_EQ(daemon.requests()[0].session().session_id(), "latest");
  EXPECT_DOUBLE_EQ(daemon.requests()[0].interval_s(), 0.5);
}

TEST(RemoteWatcher, AbortedSessionNotResumedEndsOkAfterTheResumeWait) {
  FakeClock clock;
  FakeDaemon daemon(&clock, absl::Milliseconds(25));
  daemon.Add({Full(1, "s-1", 10), Ended(2, "s-1", v1::SESSION_STATE_ABORTED)});
  // Asked again, the daemon still has it aborted (its final full says so).
  v1::WatchUpdate still_aborted = Full(1, "s-1", 10);
  still_aborted.mutable_full()->mutable_session()->set_state(v1::SESSION_STATE_ABORTED);
  daemon.Add({still_aborted, Ended(2, "s-1", v1::SESSION_STATE_ABORTED)});
  std::ostringstream out;
  RemoteWatchOptions options = Options();
  options.resume_wait = absl::Milliseconds(60);
  options.clock = [&clock] { return clock.Now(); };
  RemoteWatcher watcher(daemon.Opener(), options, &out);
  ASSERT_TRUE(watcher.Run().ok());
  // Seen aborted at 25 ms, asked again at 50 and 75 ms (within the 60 ms), given up at 100 ms.
  const std::vector<v1::WatchRequest> requests = daemon.requests();
  EXPECT_EQ(requests.size(), 4u);
  for (size_t i = 1; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i].session().session_id(), "s-1");  // The resolved id, not "latest".
  }
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("session interrupted: the traced process disconnected"));
  EXPECT_THAT(text, HasSubstr("\nsession aborted (the traced process went away"));
}

TEST(RemoteWatcher, InterruptedSessionThatResumesIsFollowedToItsEnd) {
  FakeDaemon daemon;
  daemon.Add({Full(1, "s-1", 10), Ended(2, "s-1", v1::SESSION_STATE_ABORTED)});
  daemon.Add({Full(1, "s-1", 60), Ended(2, "s-1", v1::SESSION_STATE_FINISHED)});
  std::ostringstream out;
  RemoteWatchOptions options = Options();
  options.json = true;
  RemoteWatcher watcher(daemon.Opener(), options, &out);
  ASSERT_TRUE(watcher.Run().ok());
  const std::string text = out.str();
  // JSON: the interruption is a status line, never an "ended": true document.
  EXPECT_THAT(text, HasSubstr("\"status\":\"interrupted\""));
  EXPECT_EQ(text.find("\"ended\":true"), text.rfind("\"ended\":true"));
  EXPECT_THAT(text, HasSubstr("\"state\":\"finished\""));
  EXPECT_EQ(daemon.requests().size(), 2u);
}

TEST(RemoteWatcher, SessionAlreadyAbortedEndsAtOnce) {
  FakeDaemon daemon;
  v1::WatchUpdate full = Full(1, "s-1", 10);
  full.mutable_full()->mutable_session()->set_state(v1::SESSION_STATE_ABORTED);
  daemon.Add({full, Ended(2, "s-1", v1::SESSION_STATE_ABORTED)});
  std::ostringstream out;
  RemoteWatcher watcher(daemon.Opener(), Options(), &out);  // resume_wait: 10 s.
  ASSERT_TRUE(watcher.Run().ok());
  EXPECT_EQ(daemon.requests().size(), 1u);  // Never seen live: no resume to wait for.
  EXPECT_THAT(out.str(), HasSubstr("session aborted"));
}

TEST(RemoteWatcher, ReconnectsToTheResolvedSessionAfterTheDaemonGoesAway) {
  FakeDaemon daemon;
  daemon.Add({Full(1, "s-42", 10)}, absl::UnavailableError("socket closed"));
  daemon.Add({}, absl::UnavailableError("connection refused"));
  daemon.Add({Full(1, "s-42", 50), Ended(2, "s-42", v1::SESSION_STATE_FINISHED)});
  std::ostringstream out;
  RemoteWatcher watcher(daemon.Opener(), Options(), &out);
  ASSERT_TRUE(watcher.Run().ok());
  const std::vector<v1::WatchRequest> requests = daemon.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].session().session_id(), "latest");
  EXPECT_EQ(requests[1].session().session_id(), "s-42");  // Not "latest" again.
  EXPECT_EQ(requests[2].session().session_id(), "s-42");
  EXPECT_EQ(watcher.resolved_session(), "s-42");
  const std::string text = out.str();
  const size_t lost = text.find("\ndaemon went away - reconnecting...\n");
  const size_t back = text.find("\nreconnected to unix:/tmp/rpc.sock\n");
  ASSERT_NE(lost, std::string::npos) << text;
  ASSERT_NE(back, std::string::npos) << text;
  EXPECT_LT(lost, back);
  EXPECT_EQ(text.find("daemon went away", lost + 2), std::string::npos);  // Said once.
  // The reconnecting frame still shows the last state.
  EXPECT_THAT(text.substr(lost, back - lost), HasSubstr("fc (Linear)"));
}

TEST(RemoteWatcher, ShutdownUpdateSaysTheDaemonIsStopping) {
  FakeDaemon daemon;
  v1::WatchUpdate shutdown;
  shutdown.set_sequence(2);
  shutdown.mutable_shutdown();
  daemon.Add({Full(1, "s-1", 10), shutdown});
  daemon.Add({Full(1, "s-1", 10), Ended(2, "s-1", v1::SESSION_STATE_FINISHED)});
  std::ostringstream out;
  RemoteWatcher watcher(daemon.Opener(), Options(), &out);
  ASSERT_TRUE(watcher.Run().ok());
  EXPECT_THAT(out.str(), HasSubstr("\ndaemon is stopping - reconnecting...\n"));
  EXPECT_EQ(daemon.requests().size(), 2u);
}

TEST(RemoteWatcher, UnknownSessionAtStartIsNotFoundAfterTheWait) {
  FakeClock clock;
  FakeDaemon daemon(&clock, absl::Milliseconds(100));
  daemon.Add({}, absl::NotFoundError("no session 'nope'"));
  std::ostringstream out;
  RemoteWatchOptions options = Options();  // connect_timeout: 300 ms.
  options.session = "nope";
  options.clock = [&clock] { return clock.Now(); };
  RemoteWatcher watcher(daemon.Opener(), options, &out);
  const absl::Status status = watcher.Run();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            "unknown session 'nope' on tracetorchd at unix:/tmp/rpc.sock (see 'tracetorch "
            "sessions')");
  EXPECT_EQ(daemon.requests().size(), 3u);  // Retried until 300 ms had passed, not longer.
  EXPECT_EQ(out.str(), "");                 // Nothing drawn: only the error line.
}

TEST(RemoteWatcher, UnreachableDaemonAtStartIsUnavailable) {
  FakeDaemon daemon;
  daemon.Add({}, absl::UnavailableError("failed to connect to all addresses"));
  std::ostringstream out;
  RemoteWatchOptions options = Options();
  options.connect_timeout = absl::ZeroDuration();
  RemoteWatcher watcher(daemon.Opener(), options, &out);
  const absl::Status status = watcher.Run();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()),
              StartsWith("cannot reach tracetorchd at unix:/tmp/rpc.sock: "
                         "failed to connect to all addresses"));
  EXPECT_EQ(daemon.requests().size(), 1u);
}

TEST(RemoteWatcher, DaemonStartingWithinTheWaitIsFine) {
  FakeDaemon daemon;
  daemon.Add({}, absl::UnavailableError("refused"));
  daemon.Add({Full(1, "s-1", 10), Ended(2, "s-1", v1::SESSION_STATE_FINISHED)});
  std::ostringstream out;
  RemoteWatcher watcher(daemon.Opener(), Options(), &out);
  EXPECT_TRUE(watcher.Run().ok());
  EXPECT_THAT(out.str(), HasSubstr("\nconnected to unix:/tmp/rpc.sock\n"));
}

TEST(RemoteWatcher, UnauthenticatedEndsAtOnce) {
  FakeDaemon daemon;
  daemon.Add({}, absl::UnauthenticatedError("missing bearer token"));
  std::ostringstream out;
  RemoteWatcher watcher(daemon.Opener(), Options(), &out);
  const absl::Status status = watcher.Run();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(status.message()), HasSubstr("missing bearer token"));
  EXPECT_EQ(daemon.requests().size(), 1u);
}

TEST(RemoteWatcher, DeltaBeforeFullResubscribes) {
  FakeDaemon daemon;
  daemon.Add({NanDelta(1, "s-1")}, absl::OkStatus(), /*block_at_end=*/true);
  daemon.Add({Full(1, "s-1", 10), Ended(2, "s-1", v1::SESSION_STATE_FINISHED)});
  std::ostringstream out;
  RemoteWatcher watcher(daemon.Opener(), Options(), &out);
  EXPECT_TRUE(watcher.Run().ok());
  EXPECT_EQ(daemon.requests().size(), 2u);
}

std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> docs;
  for (const std::string& line :
       std::vector<std::string>(absl::StrSplit(text, '\n', absl::SkipEmpty()))) {
    docs.push_back(nlohmann::json::parse(line));
  }
  return docs;
}

TEST(RemoteWatcher, JsonIsOneDocumentPerUpdate) {
  FakeDaemon daemon;
  daemon.Add({Full(1, "s-1", 10)}, absl::UnavailableError("gone"));
  daemon.Add({Full(1, "s-1", 10), NanDelta(2, "s-1"), Ended(3, "s-1", v1::SESSION_STATE_FINISHED)});
  std::ostringstream out;
  RemoteWatchOptions options = Options();
  options.json = true;
  options.view.filter.name_glob = "enc.*";
  RemoteWatcher watcher(daemon.Opener(), options, &out);
  ASSERT_TRUE(watcher.Run().ok());
  const std::vector<nlohmann::json> docs = JsonLines(out.str());
  ASSERT_EQ(docs.size(), 6u) << out.str();
  EXPECT_EQ(docs[0]["type"], "update");
  EXPECT_EQ(docs[0]["kind"], "full");
  EXPECT_EQ(docs[0]["sequence"], 1);
  EXPECT_EQ(docs[0]["ended"], false);
  EXPECT_EQ(docs[0]["session"]["session_id"], "s-1");
  EXPECT_EQ(docs[0]["session"]["state"], "live");
  EXPECT_EQ(docs[0]["session"]["events"], 10);
  EXPECT_EQ(docs[0]["record"]["metadata"]["model_name"], "TrainNet");
  ASSERT_EQ(docs[0]["record"]["layers"].size(), 1u);  // Filtered: enc.fc only.
  EXPECT_EQ(docs[0]["record"]["layers"][0]["full_name"], "enc.fc");
  ASSERT_EQ(docs[0]["history"].size(), 1u);
  EXPECT_EQ(docs[0]["history"][0]["latency_ms"].size(), 4u);
  EXPECT_EQ(docs[1]["type"], "status");
  EXPECT_EQ(docs[1]["status"], "reconnecting");
  EXPECT_EQ(docs[2]["type"], "status");
  EXPECT_EQ(docs[2]["status"], "connected");
  EXPECT_EQ(docs[4]["kind"], "delta");
  EXPECT_EQ(docs[4]["record"]["metadata"]["nan_origin"]["layer"], "enc.fc");
  EXPECT_EQ(docs[4]["record"]["layers"].size(), 1u);  // Merged state, not just the delta.
  EXPECT_EQ(docs[5]["kind"], "session_ended");
  EXPECT_EQ(docs[5]["ended"], true);
  EXPECT_EQ(docs[5]["session"]["state"], "finished");
  EXPECT_EQ(docs[5]["record"]["warnings"].size(), 1u);  // The final state comes with the end.
}

TEST(RemoteWatcher, TerminalRedrawsInPlaceWithinItsSize) {
  FakeDaemon daemon;
  daemon.Add({Full(1, "s-1", 10), NanDelta(2, "s-1"), Ended(3, "s-1", v1::SESSION_STATE_FINISHED)});
  std::ostringstream out;
  RemoteWatchOptions options = Options();
  options.redraw_in_place = true;
  options.view.style = Style::Rich();
  options.terminal_size = [] { return TerminalSize{.columns = 50, .rows = 12}; };
  RemoteWatcher watcher(daemon.Opener(), options, &out);
  ASSERT_TRUE(watcher.Run().ok());
  std::string text = out.str();
  EXPECT_THAT(text, StartsWith("\x1b[H\x1b[2J"));
  // After the last frame, one newline leaves the cursor below it (for the shell prompt).
  ASSERT_THAT(text, testing::EndsWith("\x1b[J\n"));
  text.pop_back();
  EXPECT_EQ(watcher.writes(), 3);
  // Later frames go home without clearing the whole screen (no flicker).
  std::vector<std::string> frames = absl::StrSplit(text, "\x1b[H", absl::SkipEmpty());
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_THAT(frames[0], StartsWith("\x1b[2J"));
  EXPECT_THAT(frames[1], Not(HasSubstr("\x1b[2J")));
  for (const std::string& frame : frames) {
    EXPECT_THAT(frame, testing::EndsWith("\x1b[J"));
    const std::vector<std::string> lines = absl::StrSplit(frame, '\n');
    EXPECT_LE(lines.size(), 11u);  // One row left free, no newline after the last.
    for (const std::string& line : lines) {
      EXPECT_LE(DisplayWidth(line), 50u) << line;
    }
  }
  EXPECT_THAT(frames[2], HasSubstr("16 more lines (narrow"));
  EXPECT_THAT(frames[2], HasSubstr("■ session finished"));
}

TEST(RemoteWatcher, JobViewUntilTheJobEnds) {
  FakeDaemon daemon;
  v1::WatchUpdate job;
  job.set_sequence(1);
  job.mutable_job()->set_job_id("job-1");
  for (int r = 0; r < 3; ++r) {
    v1::Snapshot* rank = job.mutable_job()->add_ranks();
    *rank->mutable_session() = Session("s" + std::to_string(r), v1::SESSION_STATE_LIVE, 10);
    rank->mutable_session()->mutable_identity()->set_rank(r);
    *rank->mutable_record()->add_layers() = ProtoLayer("enc.fc", r == 1 ? 5.0 : 0.5);
  }
  Anomaly d;
  d.type = AnomalyType::kRankDivergence;
  d.severity = AnomalySeverity::kWarning;
  d.layer = "enc.fc";
  d.message = "rank 1 is slow";
  d.details = {{"rank", int64_t{1}}, {"metric", std::string("latency_ms")}};
  ToProto(d, job.mutable_job()->add_divergences());
  daemon.Add({job, Ended(2, "s2", v1::SESSION_STATE_FINISHED)});
  std::ostringstream out;
  RemoteWatchOptions options = Options();
  options.job_id = "job-1";
  RemoteWatcher watcher(daemon.Opener(), options, &out);
  ASSERT_TRUE(watcher.Run().ok());
  EXPECT_EQ(daemon.requests()[0].job_id(), "job-1");
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("tracetorch watch - job job-1 - 3 ranks"));
  EXPECT_THAT(text, HasSubstr("rank 1 is slow"));
  EXPECT_THAT(text, HasSubstr("5.00ms! / 0.25"));
  EXPECT_THAT(text, HasSubstr("session finished"));
}

TEST(RunRemoteWatch, StopWhileReadingEndsOk) {
  FakeDaemon daemon;
  daemon.Add({Full(1, "s-1", 10)}, absl::OkStatus(), /*block_at_end=*/true);
  std::ostringstream out;
  RemoteWatcher watcher(daemon.Opener(), Options(), &out);
  // Like SIGINT arriving while the watcher waits for the next update: the stream has nothing
  // more and blocks until cancelled, so Run() returns only if the stop cancels it.
  const absl::Status status = RunRemoteWatch(&watcher, [&daemon](absl::Duration d) {
    return !daemon.blocked().WaitForNotificationWithTimeout(d);
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_THAT(out.str(), HasSubstr("connected to"));
  EXPECT_EQ(daemon.requests().size(), 1u);  // Stopped, not reconnected.
}

TEST(RunRemoteWatch, ReturnsTheWatchersError) {
  FakeDaemon daemon;
  daemon.Add({}, absl::UnauthenticatedError("bad token"));
  std::ostringstream out;
  RemoteWatcher watcher(daemon.Opener(), Options(), &out);
  const absl::Status status = RunRemoteWatch(&watcher, [](absl::Duration d) {
    absl::SleepFor(d);
    return true;
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
}

TEST(ResolveRemoteWatchTarget, AddressAndSessionFromTheWords) {
  auto resolve = [](std::string remote, std::vector<std::string> targets, std::string job = "") {
    return ResolveRemoteWatchTarget(RemoteWatchArgs{.remote_value = std::move(remote),
                                                    .targets = std::move(targets),
                                                    .job_id = std::move(job),
                                                    .default_address = "/run/default.sock"});
  };
  auto t = resolve("", {});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->address, "/run/default.sock");
  EXPECT_EQ(t->session, "latest");
  t = resolve("latest", {});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->address, "/run/default.sock");
  EXPECT_EQ(t->session, "latest");
  t = resolve("/tmp/x.sock", {"20260101T000000Z-box-1-1"});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->address, "/tmp/x.sock");
  EXPECT_EQ(t->session, "20260101T000000Z-box-1-1");
  t = resolve("localhost:7070", {});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->address, "localhost:7070");
  t = resolve("", {"unix:/tmp/y", "s-1"});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->address, "unix:/tmp/y");
  EXPECT_EQ(t->session, "s-1");
  t = resolve("/tmp/x.sock", {}, "job-7");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->job_id, "job-7");

  EXPECT_EQ(resolve("/tmp/x.sock", {"a", "b"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resolve("s-1", {"s-2"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resolve("", {"s-1"}, "job").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LooksLikeServiceAddress, Spellings) {
  EXPECT_TRUE(LooksLikeServiceAddress("/run/tracetorch/rpc.sock"));
  EXPECT_TRUE(LooksLikeServiceAddress("unix:rpc"));
  EXPECT_TRUE(LooksLikeServiceAddress("rpc.sock"));
  EXPECT_TRUE(LooksLikeServiceAddress("10.0.0.1:7070"));
  EXPECT_TRUE(LooksLikeServiceAddress("[::1]:7070"));
  EXPECT_FALSE(LooksLikeServiceAddress("latest"));
  EXPECT_FALSE(LooksLikeServiceAddress("20260101T000000Z-box-12-3"));
}

}  // namespace
}  // namespace tracetorch::cli
