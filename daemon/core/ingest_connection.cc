#include "daemon/core/ingest_connection.h"

#include <unistd.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/crash_point.h"
#include "protocol/agent_proto.h"
#include "protocol/frame_decoder.h"
#include "protocol/wire.h"

namespace tracetorch::daemon {
namespace {

using protocol::wire::DaemonReply;

// Whether the agent must give up the connection after an error (it is closed) or may go on.
enum class Severity { kFatal, kWarning };

void AppendError(const absl::Status& status, Severity severity, std::string* out) {
  DaemonReply error;
  error.kind = DaemonReply::Kind::kError;
  error.message = std::string(status.message());
  error.code = static_cast<int32_t>(status.code());
  error.fatal = severity == Severity::kFatal;
  protocol::AppendDaemonFrame(error, out);
}

}  // namespace

IngestConnection::IngestConnection(SessionManager* manager, DaemonCounters* counters,
                                   RateLimitedLog* log, PeerCredentials peer,
                                   uint32_t max_frame_bytes, std::function<void()> durable_wake)
    : manager_(manager),
      counters_(counters),
      log_(log),
      peer_(peer),
      max_frame_bytes_(max_frame_bytes),
      durable_wake_(std::move(durable_wake)) {}

IngestConnection::~IngestConnection() {
  OnClosed(false);
  if (passed_fd_ >= 0) close(passed_fd_);
}

void IngestConnection::OnPassedFd(int fd) {
  if (passed_fd_ >= 0) close(passed_fd_);
  passed_fd_ = session_ == nullptr ? fd : -1;
  if (session_ != nullptr) close(fd);  // After the Hello: nothing to use it for.
}

bool IngestConnection::PeerStopped() const {
  return peer_probe_ != nullptr && peer_probe_->Stopped();
}

void IngestConnection::AppendRejection(const absl::Status& status, std::string* out) {
  AppendError(status, Severity::kFatal, out);
}

bool IngestConnection::RejectFrame(std::string_view cause, const absl::Status& status,
                                   std::string* out) {
  Bump(counters_->rejected_frames);
  return Close(cause, status, out);
}

bool IngestConnection::Close(std::string_view cause, const absl::Status& status, std::string* out) {
  if (session_ == nullptr) Bump(counters_->rejected_connections);
  log_->Warn(cause,
             absl::StrCat("ingest: closing connection from pid ", peer_.pid, " uid ", peer_.uid,
                          session_id_.empty() ? "" : absl::StrCat(" (session ", session_id_, ")"),
                          ": ", status.message()));
  AppendError(status, Severity::kFatal, out);
  return false;
}

bool IngestConnection::OnFrameHeader(uint32_t length, std::string* out) {
  if (session_ == nullptr && length > kMaxHelloFrameBytes && length <= max_frame_bytes_) {
    return RejectFrame(
        "hello size",
        absl::InvalidArgumentError(absl::StrCat(
            "first frame of ", length, " bytes; a Hello takes at most ", kMaxHelloFrameBytes)),
        out);
  }
  if (length == 0 || length > max_frame_bytes_) {
    return RejectFrame(
        "frame size",
        absl::InvalidArgumentError(absl::StrCat("frame of ", length, " bytes; the limit is ",
                                                max_frame_bytes_, " (and frames are never empty)")),
        out);
  }
  return true;
}

bool IngestConnection::OnFrame(std::string_view payload, std::string* out) {
  Bump(counters_->bytes_received, payload.size() + protocol::wire::kFrameHeaderBytes);
  if (session_ != nullptr && !ended_) {
    if (std::optional<std::string_view> bytes = protocol::wire::EventBatchOfMessage(payload);
        bytes.has_value()) {
      // The hot path: decoded from the frame's bytes (protocol/frame_decoder.h), no message.
      absl::StatusOr<BatchOutcome> r = session_->AddBatchBytes(*bytes);
      if (!r.ok()) {
        return RejectFrame("garbage",
                           absl::InvalidArgumentError("frame is not a tracetorch.v1.AgentMessage"),
                           out);
      }
      HandleOutcome(*r, out);
      return true;
    }
  }
  // Every other message (rare: a Hello, a layer table, heartbeats, the End) is decoded whole.
  absl::StatusOr<protocol::AgentMessage> message = protocol::DecodeAgentMessage(payload);
  if (!message.ok()) {
    return RejectFrame(
        "garbage", absl::InvalidArgumentError("frame is not a tracetorch.v1.AgentMessage"), out);
  }
  using Kind = protocol::AgentMessage::Kind;
  if (ended_) {
    return RejectFrame("after end", absl::FailedPreconditionError("message after End"), out);
  }
  if (session_ == nullptr) {
    if (message->kind != Kind::kHello) {
      return RejectFrame("no hello",
                         absl::FailedPreconditionError("the first message must be a Hello"), out);
    }
    absl::StatusOr<SessionManager::Opened> opened = manager_->Open(message->hello, peer_);
    if (!opened.ok()) {
      return Close(absl::StrCat("hello ", absl::StatusCodeToString(opened.status().code())),
                   opened.status(), out);
    }
    session_ = opened->session;
    attachment_ = opened->attachment;
    session_id_ = session_->id();
    if (durable_wake_) listener_ = session_->AddDurableListener(durable_wake_);
    told_ = session_->durable();
    FollowSession(message->hello.flight_recorder);
    DaemonReply welcome;
    welcome.kind = DaemonReply::Kind::kWelcome;
    welcome.session_id = session_id_;
    welcome.resumed = opened->resumed;
    if (manager_->persistent()) {  // Else nothing is ever durable: say nothing will be.
      welcome.durable_sequence = told_.sequence;
      welcome.durable_events = told_.events;
    }
    protocol::AppendDaemonFrame(welcome, out);
    return true;
  }
  switch (message->kind) {
    case Kind::kHello:
      return RejectFrame("second hello",
                         absl::FailedPreconditionError("a second Hello on one connection"), out);
    case Kind::kLayerTable:
      if (absl::Status s = session_->DeclareLayers(message->layers); !s.ok()) {
        if (s.code() == absl::StatusCode::kResourceExhausted) Bump(counters_->limit_hits);
        return RejectFrame("layer table", s, out);
      }
      return true;
    case Kind::kEvents: {  // Not the exact framing of the hot path (extra fields).
      // The bytes were re-encoded from a parsed message: they decode.
      absl::StatusOr<BatchOutcome> r = session_->AddBatchBytes(message->events);
      HandleOutcome(r.ok() ? *r : BatchOutcome{}, out);
      return true;
    }
    case Kind::kHeartbeat:
      session_->Heartbeat(message->heartbeat);
      return true;
    case Kind::kEnd:
      session_->Finish(message->end, absl::Now());
      ended_ = true;
      // The final snapshot now, and its acknowledgement with it: the agent holds the session's
      // tail until it has one.
      CrashPoint("end");
      Release();
      AppendDurable(out);
      return true;
    case Kind::kNone:
      break;
  }
  return RejectFrame("empty message", absl::InvalidArgumentError("AgentMessage without a kind"),
                     out);
}

void IngestConnection::FollowSession(bool has_recorder) {
  const int fd = std::exchange(passed_fd_, -1);
  if (absl::StatusOr<std::unique_ptr<ProcessProbe>> probe = ProcessProbe::Open(peer_.pid);
      probe.ok()) {
    peer_probe_ = *std::move(probe);
  }
  if (monitor_ == nullptr) {
    if (fd >= 0) close(fd);
    return;
  }
  std::shared_ptr<FlightRegion> region;
  if (has_recorder && fd < 0) {
    Bump(counters_->flight_recorders_refused);
    log_->Warn("flight recorder", absl::StrCat("ingest: session ", session_id_,
                                               ": a Hello announced a flight recorder but passed "
                                               "no descriptor"));
  } else if (has_recorder) {
    absl::StatusOr<std::shared_ptr<FlightRegion>> adopted = FlightRegion::Adopt(fd);
    if (adopted.ok()) {
      region = *std::move(adopted);
    } else {
      Bump(counters_->flight_recorders_refused);
      log_->Warn("flight recorder",
                 absl::StrCat("ingest: session ", session_id_,
                              ": flight recorder refused: ", adopted.status().message()));
    }
  } else if (fd >= 0) {
    close(fd);
  }
  monitor_->Watch(
      session_,
      FlightMonitor::Target{
          .pid = peer_.pid, .uid = peer_.uid, .probe = peer_probe_, .region = std::move(region)});
}

void IngestConnection::HandleOutcome(const BatchOutcome& r, std::string* out) {
  Bump(counters_->events_total, r.accepted);
  if (r.rejected > 0) {
    Bump(counters_->rejected_events, r.rejected);
    log_->Warn("undeclared layer", absl::StrCat("ingest: session ", session_id_, ": ", r.rejected,
                                                " events rejected: ", r.error.message()));
    if (!warned_undeclared_) {
      warned_undeclared_ = true;
      AppendError(r.error, Severity::kWarning, out);
    }
  }
}

void IngestConnection::AppendDurable(std::string* out) {
  if (session_ == nullptr || closed_) return;
  const Session::Durable now = session_->durable();
  if (now.sequence <= told_.sequence && now.events <= told_.events) return;
  told_ = now;
  DaemonReply durable;
  durable.kind = DaemonReply::Kind::kDurable;
  durable.durable_sequence = now.sequence;
  durable.durable_events = now.events;
  protocol::AppendDaemonFrame(durable, out);
}

void IngestConnection::OnTimeout(const absl::Status& status, std::string* out) {
  Bump(counters_->connections_timed_out);
  Close("timeout", status, out);
}

void IngestConnection::OnEvicted(const absl::Status& status, std::string* out) {
  Bump(counters_->connections_evicted);
  Close("evicted", status, out);
}

void IngestConnection::Release() {
  if (session_ == nullptr || released_) return;
  released_ = true;
  if (listener_ != 0) session_->RemoveDurableListener(listener_);
  listener_ = 0;
  manager_->Release(session_, attachment_, ended_);
}

void IngestConnection::OnClosed(bool truncated) {
  if (closed_) return;
  closed_ = true;
  if (truncated) {
    Bump(counters_->rejected_frames);
    log_->Warn("truncated",
               absl::StrCat("ingest: connection from pid ", peer_.pid, " ended inside a frame"));
  }
  Release();
  session_.reset();
}

}  // namespace tracetorch::daemon
