#include "daemon/core/ingest_connection.h"

#include <unistd.h>

#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/crash_point.h"
#include "protocol/wire.h"

namespace tracetorch::daemon {

void AppendDaemonFrame(const v1::DaemonMessage& message, std::string* out) {
  const size_t size = message.ByteSizeLong();
  const size_t start = out->size();
  out->resize(start + protocol::wire::kFrameHeaderBytes + size);
  protocol::wire::PutFrameHeader(static_cast<uint32_t>(size), out->data() + start);
  message.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(out->data() + start + protocol::wire::kFrameHeaderBytes));
}

namespace {

void AppendError(const absl::Status& status, bool fatal, std::string* out) {
  v1::DaemonMessage m;
  v1::IngestError* e = m.mutable_error();
  e->set_message(std::string(status.message()));
  e->set_code(static_cast<int32_t>(status.code()));
  e->set_fatal(fatal);
  AppendDaemonFrame(m, out);
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
  AppendError(status, /*fatal=*/true, out);
}

bool IngestConnection::Fail(std::string_view cause, const absl::Status& status, bool count_frame,
                            std::string* out) {
  if (count_frame) Bump(counters_->rejected_frames);
  if (session_ == nullptr) Bump(counters_->rejected_connections);
  log_->Warn(cause,
             absl::StrCat("ingest: closing connection from pid ", peer_.pid, " uid ", peer_.uid,
                          session_id_.empty() ? "" : absl::StrCat(" (session ", session_id_, ")"),
                          ": ", status.message()));
  AppendError(status, /*fatal=*/true, out);
  return false;
}

bool IngestConnection::OnFrameHeader(uint32_t length, std::string* out) {
  if (session_ == nullptr && length > kMaxHelloFrameBytes && length <= max_frame_bytes_) {
    return Fail(
        "hello size",
        absl::InvalidArgumentError(absl::StrCat(
            "first frame of ", length, " bytes; a Hello takes at most ", kMaxHelloFrameBytes)),
        /*count_frame=*/true, out);
  }
  if (length == 0 || length > max_frame_bytes_) {
    return Fail(
        "frame size",
        absl::InvalidArgumentError(absl::StrCat("frame of ", length, " bytes; the limit is ",
                                                max_frame_bytes_, " (and frames are never empty)")),
        /*count_frame=*/true, out);
  }
  return true;
}

namespace {

// When `payload` is exactly AgentMessage{events: <bytes>} (tag 3, length-delimited, nothing else),
// returns the EventBatch bytes.
std::optional<std::string_view> EventBatchBytes(std::string_view payload) {
  if (payload.size() < 2 || static_cast<uint8_t>(payload[0]) != ((3 << 3) | 2)) return std::nullopt;
  uint64_t len = 0;
  size_t i = 1;
  for (int shift = 0; i < payload.size() && shift < 35; shift += 7, ++i) {
    const uint8_t b = static_cast<uint8_t>(payload[i]);
    len |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      ++i;
      if (len != payload.size() - i) return std::nullopt;
      return payload.substr(i);
    }
  }
  return std::nullopt;
}

}  // namespace

bool IngestConnection::OnFrame(std::string_view payload, std::string* out) {
  Bump(counters_->bytes_received, payload.size() + protocol::wire::kFrameHeaderBytes);
  if (session_ != nullptr && !ended_) {
    if (std::optional<std::string_view> bytes = EventBatchBytes(payload); bytes.has_value()) {
      // The hot path: decoded from the frame's bytes (protocol/frame_decoder.h), no message.
      absl::StatusOr<BatchOutcome> r = session_->AddBatchBytes(*bytes);
      if (!r.ok()) {
        return Fail("garbage",
                    absl::InvalidArgumentError("frame is not a tracetorch.v1.AgentMessage"),
                    /*count_frame=*/true, out);
      }
      HandleOutcome(*r, out);
      return true;
    }
  }
  // A message parsed from a large frame keeps that much memory allocated (Clear() keeps repeated
  // fields' capacity): such a one is replaced by a fresh message once handled.
  constexpr size_t kKeepMessageBelow = 64 << 10;
  absl::Cleanup reset_large = [this, large = payload.size() >= kKeepMessageBelow] {
    if (large) message_ = v1::AgentMessage();
  };
  if (!message_.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return Fail("garbage", absl::InvalidArgumentError("frame is not a tracetorch.v1.AgentMessage"),
                /*count_frame=*/true, out);
  }
  if (ended_) {
    return Fail("after end", absl::FailedPreconditionError("message after End"),
                /*count_frame=*/true, out);
  }
  if (session_ == nullptr) {
    if (!message_.has_hello()) {
      return Fail("no hello", absl::FailedPreconditionError("the first message must be a Hello"),
                  /*count_frame=*/true, out);
    }
    absl::StatusOr<SessionManager::Opened> opened = manager_->Open(message_.hello(), peer_);
    if (!opened.ok()) {
      return Fail(absl::StrCat("hello ", absl::StatusCodeToString(opened.status().code())),
                  opened.status(), /*count_frame=*/false, out);
    }
    session_ = opened->session;
    attachment_ = opened->attachment;
    session_id_ = session_->id();
    if (durable_wake_) listener_ = session_->AddDurableListener(durable_wake_);
    told_ = session_->durable();
    FollowSession(message_.hello().has_flight_recorder());
    v1::DaemonMessage welcome;
    welcome.mutable_welcome()->set_session_id(session_id_);
    welcome.mutable_welcome()->set_resumed(opened->resumed);
    if (manager_->persistent()) {  // Else nothing is ever durable: say nothing will be.
      welcome.mutable_welcome()->set_durable_sequence(told_.sequence);
      welcome.mutable_welcome()->set_durable_events(told_.events);
    }
    AppendDaemonFrame(welcome, out);
    return true;
  }
  switch (message_.kind_case()) {
    case v1::AgentMessage::kHello:
      return Fail("second hello", absl::FailedPreconditionError("a second Hello on one connection"),
                  /*count_frame=*/true, out);
    case v1::AgentMessage::kLayerTable:
      if (absl::Status s = session_->DeclareLayers(message_.layer_table()); !s.ok()) {
        if (s.code() == absl::StatusCode::kResourceExhausted) Bump(counters_->limit_hits);
        return Fail("layer table", s, /*count_frame=*/true, out);
      }
      return true;
    case v1::AgentMessage::kEvents:  // Not the exact framing of the hot path (extra fields).
      HandleOutcome(session_->AddBatch(message_.events()), out);
      return true;
    case v1::AgentMessage::kHeartbeat:
      session_->Heartbeat(message_.heartbeat());
      return true;
    case v1::AgentMessage::kEnd:
      session_->Finish(message_.end(), absl::Now());
      ended_ = true;
      // The final snapshot now, and its acknowledgement with it: the agent holds the session's
      // tail until it has one.
      CrashPoint("end");
      Release();
      AppendDurable(out);
      return true;
    case v1::AgentMessage::KIND_NOT_SET:
      break;
  }
  return Fail("empty message", absl::InvalidArgumentError("AgentMessage without a kind"),
              /*count_frame=*/true, out);
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
      AppendError(r.error, /*fatal=*/false, out);
    }
  }
}

void IngestConnection::AppendDurable(std::string* out) {
  if (session_ == nullptr || closed_) return;
  const Session::Durable now = session_->durable();
  if (now.sequence <= told_.sequence && now.events <= told_.events) return;
  told_ = now;
  v1::DaemonMessage m;
  m.mutable_durable()->set_sequence(now.sequence);
  m.mutable_durable()->set_events(now.events);
  AppendDaemonFrame(m, out);
}

void IngestConnection::OnTimeout(const absl::Status& status, std::string* out) {
  Bump(counters_->connections_timed_out);
  Fail("timeout", status, /*count_frame=*/false, out);
}

void IngestConnection::OnEvicted(const absl::Status& status, std::string* out) {
  Bump(counters_->connections_evicted);
  Fail("evicted", status, /*count_frame=*/false, out);
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
