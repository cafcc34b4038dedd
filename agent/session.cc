#include "agent/session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/flight_setup.h"
#include "guest/hook_guard.h"
#include "guest/log.h"
#include "protocol/events.h"
#include "trace/json.h"

namespace tracetorch::agent {

absl::StatusOr<std::unique_ptr<Session>> Session::Create(SessionOptions options) {
  absl::StatusOr<std::shared_ptr<Tracer>> tracer =
      Tracer::Create(std::move(options.tracer), std::move(options.metadata));
  if (!tracer.ok()) return tracer.status();
  return std::unique_ptr<Session>(new Session(*std::move(tracer), MakeFlightRecorder()));
}

Session::Session(std::shared_ptr<Tracer> tracer, std::shared_ptr<flight::Recorder> recorder)
    : tracer_(std::move(tracer)), recorder_(std::move(recorder)) {
  tracer_->SetFlightRecorder(recorder_);
}

Session::~Session() {
  std::unique_ptr<WatchFlusher> flusher;
  std::shared_ptr<DaemonSink> sink;
  {
    absl::MutexLock lock(&mu_);
    flusher = std::move(flusher_);
    sink = std::move(sink_);
  }
  flusher.reset();  // Stops and joins.
  if (sink != nullptr) {
    tracer_->SetEventSink(nullptr);
    sink.reset();  // Closes the client with a bounded wait (inert in a forked child).
  }
}

// ---- Before a block -----------------------------------------------------------------------------

absl::Status Session::ConnectDaemon(std::string address, const TraceMetadata& identity) {
  if (active()) return absl::FailedPreconditionError("cannot connect a stream while tracing");
  (void)CloseStream(kCloseWait, std::nullopt);
  DaemonSinkOptions options;
  options.client.address = std::move(address);
  options.client.identity = protocol::IdentityFor(identity);
  options.flight_recorder = recorder_;
  absl::StatusOr<std::shared_ptr<DaemonSink>> sink = DaemonSink::Create(std::move(options));
  if (!sink.ok()) return sink.status();
  tracer_->SetEventSink(*sink);  // Replays the layers declared so far.
  absl::MutexLock lock(&mu_);
  sink_ = *std::move(sink);
  return absl::OkStatus();
}

absl::Status Session::SetOps(std::optional<OpsOptions> ops) {
  if (active()) return absl::FailedPreconditionError("cannot change ops while tracing");
  std::unique_ptr<ops::NanOpWatch> watch;
  if (ops.has_value()) {
    watch = std::make_unique<ops::NanOpWatch>(std::move(ops->model_name), std::move(ops->root_type),
                                              std::move(ops->source));
    for (OpsOptions::Parameter& p : ops->parameters) {
      watch->AddParameter(std::move(p.name), p.tensor, p.buffer);
    }
  }
  watch_ = std::move(watch);
  absl::MutexLock lock(&mu_);
  kept_.reset();
  ops_stats_ = watch_ != nullptr ? std::optional<OpsStats>(OpsStats{}) : std::nullopt;
  return absl::OkStatus();
}

// ---- A block ------------------------------------------------------------------------------------

absl::Status Session::Start() {
  if (absl::Status s = tracer_->Start(); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  final_.reset();
  if (sink_ == nullptr) closed_stream_.reset();  // This block does not stream.
  return absl::OkStatus();
}

absl::Status Session::StartWatch(std::string path, absl::Duration interval) {
  StopWatch();
  std::weak_ptr<Tracer> weak = tracer_;
  absl::StatusOr<std::unique_ptr<WatchFlusher>> flusher =
      WatchFlusher::Start(path, interval, [weak]() -> TraceRecord {
        if (std::shared_ptr<Tracer> t = weak.lock()) return t->WatchSnapshot();
        return TraceRecord{};
      });
  if (!flusher.ok()) return flusher.status();
  absl::MutexLock lock(&mu_);
  flusher_ = *std::move(flusher);
  watch_path_ = std::move(path);
  return absl::OkStatus();
}

void Session::StopWatch() {
  std::unique_ptr<WatchFlusher> flusher;
  {
    absl::MutexLock lock(&mu_);
    flusher = std::move(flusher_);
  }
  if (flusher != nullptr) flusher->Stop();  // Outside mu_: a flush may be in progress.
}

absl::Status Session::CloseStream(absl::Duration wait, std::optional<double> total_time_ms) {
  std::shared_ptr<DaemonSink> sink;
  {
    absl::MutexLock lock(&mu_);
    sink = std::move(sink_);
  }
  if (sink == nullptr) return absl::OkStatus();
  tracer_->SetEventSink(nullptr);
  const absl::Status s = sink->Close(
      total_time_ms, static_cast<uint64_t>(std::max<int64_t>(0, tracer_->hook_errors())),
      std::max(wait, absl::ZeroDuration()));
  StreamStats closed{sink->stats(), sink->session_id()};
  absl::MutexLock lock(&mu_);
  closed_stream_ = std::move(closed);
  return s;
}

absl::Status Session::Finish(std::optional<double> total_time_ms) {
  std::string watch_path;
  {
    absl::MutexLock lock(&mu_);
    if (flusher_ != nullptr) watch_path = watch_path_;
  }
  StopWatch();
  tracer_->Stop();
  // The last step's backward may have named an origin the op watch keeps a graph for.
  if (watch_ != nullptr) guest::GuardHook(tracer_->errors(), "ops_end", [&] { SyncOps(); });
  // Bounded: the daemon gets kCloseWait to take the rest; what it did not take is counted as
  // dropped. The embedded record is complete either way.
  if (absl::Status s = CloseStream(kCloseWait, total_time_ms); !s.ok()) {
    guest::WarnOnce("daemon_close",
                    absl::StrCat("tracetorch: the daemon stream did not complete: ", s.ToString()));
  }
  absl::StatusOr<TraceRecord> record = tracer_->Finalize(total_time_ms);
  if (!record.ok()) {
    tracer_->errors().Record("finalize", record.status().ToString());
    TraceRecord snapshot = tracer_->Snapshot();
    absl::MutexLock lock(&mu_);
    Decorate(&snapshot);
    final_ = std::move(snapshot);
    return record.status();
  }
  {
    absl::MutexLock lock(&mu_);
    Decorate(&*record);
    final_ = *record;
  }
  if (watch_path.empty()) return absl::OkStatus();
  absl::Status written = WriteTraceFile(watch_path, *record);
  if (!written.ok()) tracer_->errors().Record("watch_final_flush", written.ToString());
  return written;
}

void Session::Abandon() {
  StopWatch();
  tracer_->Stop();
  (void)CloseStream(kCloseWait, std::nullopt);
}

// ---- The op watch -------------------------------------------------------------------------------

bool Session::BeginOpsStep(const std::vector<at::Tensor>& inputs) {
  SyncOps();  // The previous step's backward may have named an origin.
  const int64_t skipped = watch_->skipped_steps();
  watch_->BeginStep(tracer_->steps() - 1, inputs);
  if (watch_->skipped_steps() != skipped) PublishOpsStats();
  return watch_->recording();
}

void Session::EndOpsStep(const std::vector<at::Tensor>* outputs) {
  const int64_t errors = watch_->hook_errors();
  if (outputs != nullptr) {
    watch_->EndStep(*outputs);
  } else {
    watch_->AbortStep();
  }
  if (watch_->hook_errors() > errors) tracer_->errors().Record("ops", watch_->first_error());
  SyncOps();
}

void Session::SyncOps() {
  std::optional<std::optional<NanOrigin>> report = watch_->TakeReport(tracer_->nan_origin());
  PublishOpsStats();
  if (!report) return;  // No graph kept just now.
  // Trouble the layers did not see (absorbed inside a module) gets the session its origin.
  if (*report) tracer_->AdoptNanOrigin(**report);
  auto kept = std::make_shared<const KeptOps>(
      KeptOps{watch_->kept_graph(), watch_->kept_json(), watch_->kept_origin()});
  std::shared_ptr<DaemonSink> sink;
  {
    absl::MutexLock lock(&mu_);
    kept_ = kept;
    sink = sink_;
  }
  // Streamed once, with the origin that now names its op.
  if (sink != nullptr) sink->SendOpGraph(*report, kept->json);
}

void Session::PublishOpsStats() {
  OpsStats stats;
  stats.recorded_steps = watch_->recorded_steps();
  stats.skipped_steps = watch_->skipped_steps();
  if (const OpGraph* kept = watch_->kept(); kept != nullptr) stats.kept_step = kept->step;
  absl::MutexLock lock(&mu_);
  ops_stats_ = stats;
}

// ---- Results ------------------------------------------------------------------------------------

void Session::Decorate(TraceRecord* record) const {
  if (std::optional<StreamStats> stream = StreamStatsLocked()) {
    record->metadata.SetExtra("dropped_events", absl::StrCat(stream->client.dropped_events));
  }
  if (kept_ != nullptr) {
    if (record->metadata.nan_origin) kept_->origin.Annotate(&*record->metadata.nan_origin);
    record->op_graph = kept_->graph;
  }
}

std::optional<StreamStats> Session::StreamStatsLocked() const {
  if (sink_ != nullptr) return StreamStats{sink_->stats(), sink_->session_id()};
  return closed_stream_;
}

std::optional<TraceRecord> Session::finished_record() const {
  absl::MutexLock lock(&mu_);
  return final_;
}

TraceRecord Session::Snapshot() const {
  {
    absl::MutexLock lock(&mu_);
    if (final_.has_value()) return *final_;
  }
  TraceRecord record = tracer_->Snapshot();
  absl::MutexLock lock(&mu_);
  Decorate(&record);
  return record;
}

absl::StatusOr<TraceRecord> Session::Current() const {
  {
    absl::MutexLock lock(&mu_);
    if (final_.has_value()) return *final_;
  }
  absl::StatusOr<TraceRecord> record = tracer_->Finalize(std::nullopt);
  if (!record.ok()) return record.status();
  absl::MutexLock lock(&mu_);
  Decorate(&*record);
  return record;
}

bool Session::streaming() const {
  absl::MutexLock lock(&mu_);
  return sink_ != nullptr;
}

std::optional<StreamStats> Session::stream_stats() const {
  absl::MutexLock lock(&mu_);
  return StreamStatsLocked();
}

std::optional<OpsStats> Session::ops_stats() const {
  absl::MutexLock lock(&mu_);
  return ops_stats_;
}

std::shared_ptr<const KeptOps> Session::kept_ops() const {
  absl::MutexLock lock(&mu_);
  return kept_;
}

}  // namespace tracetorch::agent
