#include "client/daemon_client.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/batch_frames.h"
#include "client/event_queue.h"
#include "client/frame_socket.h"
#include "client/replay_buffer.h"
#include "guest/backoff.h"
#include "protocol/address.h"
#include "protocol/wire.h"

namespace tracetorch::client {

using protocol::BackwardEvent;
using protocol::ForwardEvent;
using protocol::LayerDecl;
namespace wire = protocol::wire;

namespace {

// How long Close() lets the sender finish a write it is in before aborting it (FrameSocket's
// waits check the abort flag this often).
constexpr absl::Duration kPollSlice = absl::Milliseconds(50);
constexpr size_t kLayersPerTableFrame = 4096;

}  // namespace

// ---- Impl ---------------------------------------------------------------------------------------

class DaemonClient::Impl {
 public:
  Impl(DaemonClientOptions options, std::string socket_path, int flight_fd)
      : options_(std::move(options)),
        socket_path_(std::move(socket_path)),
        flight_fd_(flight_fd),
        queue_(options_.queue_capacity, options_.max_frame_bytes, options_.max_batch_events),
        replay_(options_.replay_capacity, options_.replay_max_bytes) {}

  ~Impl() {
    if (thread_.joinable()) thread_.join();
    CloseSocket();
    if (flight_fd_ >= 0) close(flight_fd_);
  }

  absl::Status Start() {
    // The sender thread takes no signals: they belong to the host program's threads.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    absl::Status status;
    try {
      thread_ = std::thread([this] { Run(); });
    } catch (const std::exception& e) {
      status = absl::InternalError(
          absl::StrCat("cannot start the tracetorch sender thread: ", e.what()));
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return status;
  }

  void DeclareLayers(absl::Span<const LayerDecl> layers) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (const LayerDecl& l : layers) {
      if (layer_ids_.insert(l.id).second) layers_.push_back(l);
    }
  }

  // Encoded straight into the queue (no copy of the event, no allocation once the queue's buffer
  // has grown), without mu_; the sender wraps the queued bytes in frames.
  bool EnqueueForward(const ForwardEvent& event) { return queue_.PushForward(event); }
  bool EnqueueBackward(const BackwardEvent& event) { return queue_.PushBackward(event); }

  void SetNanOrigin(const NanOrigin& origin) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    nan_origin_ = origin;
  }

  void SetOpGraph(std::string op_graph_json) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    op_graph_ = std::move(op_graph_json);
  }

  void SetEndInfo(std::optional<double> total_time_ms, uint64_t hook_errors)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    total_time_ms_ = total_time_ms;
    hook_errors_ = hook_errors;
  }

  absl::Status Flush(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (closing_) return absl::FailedPreconditionError("the tracetorchd client is closed");
    const uint64_t target = queue_.accepted();
    queue_.Wake();
    auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ >= target; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("flush: ", target - finished_, " events not yet written to tracetorchd at ",
                       socket_path_, connected_ ? "" : " (not connected)"));
    }
    return absl::OkStatus();
  }

  absl::Status WaitUntilConnected(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(&connected_), timeout)) {
      return absl::DeadlineExceededError(absl::StrCat("not connected to tracetorchd at ",
                                                      socket_path_, last_error_.empty() ? "" : ": ",
                                                      last_error_));
    }
    return absl::OkStatus();
  }

  absl::Status Close(absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_) {
    // Before closing_: once the sender sees closing_, nothing more can be queued, so what
    // FinishClose drops is final.
    queue_.Refuse();
    {
      absl::MutexLock lock(&mu_);
      if (closing_)
        return absl::FailedPreconditionError("the tracetorchd client is already closed");
      closing_ = true;
      close_deadline_ = absl::Now() + wait;
    }
    if (!sender_done_.WaitForNotificationWithTimeout(wait + kPollSlice)) {
      abort_io_.store(true, std::memory_order_relaxed);
    }
    if (thread_.joinable()) thread_.join();
    absl::MutexLock lock(&mu_);
    return close_status_;
  }

  std::string session_id() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return session_id_;
  }

  DaemonClientStats stats() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    DaemonClientStats s = stats_;
    s.enqueued_events = queue_.accepted();
    s.dropped_events = DroppedLocked();
    s.connected = connected_;
    s.last_error = last_error_;
    return s;
  }

  bool closed() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return closing_;
  }

 private:
  // Every event dropped: refused by the queue, or lost by the sender (a broken connection, unsent
  // at Close).
  uint64_t DroppedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stats_.dropped_events + queue_.dropped();
  }

  // ---- Sender thread ----

  void Run() {
    guest::Backoff backoff({.initial = options_.initial_backoff, .max = options_.max_backoff});
    absl::Time last_write = absl::Now();
    while (true) {
      try {
        if (!Step(backoff, &last_write)) break;
      } catch (const std::exception& e) {
        // Never let an exception escape into the host process; back off and carry on.
        Disconnect(absl::StrCat("sender error: ", e.what()));
        absl::SleepFor(options_.initial_backoff);
      } catch (...) {
        Disconnect("sender error");
        absl::SleepFor(options_.initial_backoff);
      }
    }
    CloseSocket();
    sender_done_.Notify();
  }

  // One round of the sender loop; false when the sender should exit.
  bool Step(guest::Backoff& backoff, absl::Time* last_write) {
    bool closing;
    absl::Time deadline;
    {
      absl::MutexLock lock(&mu_);
      closing = closing_;
      deadline = close_deadline_;
    }
    if (closing && (absl::Now() >= deadline || abort_io_.load(std::memory_order_relaxed))) {
      // Out of time. A connection that is up still gets the End, in one short write, with what
      // was not sent counted as dropped: the process ended, and its session says so (finished,
      // not aborted as if it had crashed).
      bool end_sent = false;
      if (socket_.has_value() && !abort_io_.load(std::memory_order_relaxed)) {
        DropQueued();
        end_sent = SendEnd(absl::Now() + kPollSlice);
      }
      FinishClose(end_sent);
      return false;
    }

    if (!socket_.has_value()) {
      absl::Status s =
          Connect(closing ? std::min(deadline, absl::Now() + options_.handshake_timeout)
                          : absl::Now() + options_.handshake_timeout);
      if (!s.ok()) {
        absl::MutexLock lock(&mu_);
        ++stats_.connect_failures;
        last_error_ = std::string(s.message());
        const absl::Duration wait =
            closing ? std::min(backoff.Next(), deadline - absl::Now()) : backoff.Next();
        // Wakes early when Close() is called.
        auto woken = [this, closing]()
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closing_ != closing; };
        mu_.AwaitWithTimeout(absl::Condition(&woken), wait);
        return true;
      }
      backoff.Reset();
      *last_write = absl::Now();
    }

    // Wait for something to send: a full batch, a flush, Close(), or the flush interval (the
    // queue wakes the sender once per batch, not per event). The events first, then the layers:
    // a layer declared before an event was queued is then in layers_.
    send_events_ = queue_.Take(absl::Now() + options_.flush_interval, &send_queue_);
    {
      absl::MutexLock lock(&mu_);
      if (layers_sent_ < layers_.size()) {
        send_layers_.assign(layers_.begin() + static_cast<ptrdiff_t>(layers_sent_), layers_.end());
        layers_sent_ = layers_.size();
      }
      if (nan_origin_.has_value()) {
        send_nan_origin_ = std::move(nan_origin_);
        nan_origin_.reset();
      }
      if (op_graph_.has_value()) {
        send_op_graph_ = std::move(op_graph_);
        op_graph_.reset();
      }
      closing = closing_;
      deadline = close_deadline_;
    }

    const absl::Time write_deadline = closing ? deadline : absl::Now() + options_.io_timeout;
    const bool had_events = send_events_ > 0;
    if (!send_layers_.empty() || had_events || send_nan_origin_.has_value() ||
        send_op_graph_.has_value()) {
      SendTaken(write_deadline);
      *last_write = absl::Now();
    } else if (socket_.has_value() && absl::Now() - *last_write >= options_.heartbeat_interval) {
      out_.clear();
      uint64_t dropped;
      {
        absl::MutexLock lock(&mu_);
        dropped = DroppedLocked();
      }
      wire::AppendHeartbeatFrame(absl::GetCurrentTimeNanos(), dropped, &out_);
      if (absl::Status s = socket_->WriteAll(out_, write_deadline); !s.ok()) {
        Disconnect(s.message());
      }
      *last_write = absl::Now();
    }
    if (socket_.has_value()) ReadIncoming();

    if (closing) {
      bool empty;
      {
        absl::MutexLock lock(&mu_);
        empty = queue_.size() == 0 && layers_sent_ == layers_.size();
      }
      if (empty && socket_.has_value()) {
        const bool end_sent = SendEnd(deadline);
        if (end_sent) AwaitDurable(deadline);
        FinishClose(end_sent);
        return false;
      }
    }
    return true;
  }

  // Encodes and writes the taken layers and events. Every batch frame gets the stream position of
  // its first event and goes into the replay buffer; a frame a broken connection cut short is
  // written again after the reconnect (or, out of the buffer, counted as lost by the daemon).
  void SendTaken(absl::Time deadline) {
    const uint64_t taken = send_events_;
    const uint64_t first_position = next_event_;
    out_.clear();
    for (size_t i = 0; i < send_layers_.size(); i += kLayersPerTableFrame) {
      const size_t n = std::min(kLayersPerTableFrame, send_layers_.size() - i);
      wire::AppendLayerTableFrame(absl::MakeConstSpan(send_layers_).subspan(i, n), &out_);
    }
    uint64_t dropped;
    {
      absl::MutexLock lock(&mu_);
      dropped = DroppedLocked();
    }
    frame_ends_.clear();
    TakenEvents taken_events{send_queue_, send_events_,
                             send_nan_origin_.has_value() ? &*send_nan_origin_ : nullptr,
                             send_op_graph_.has_value() ? &*send_op_graph_ : nullptr, dropped};
    const BatchFramesResult framed =
        AppendBatchFrames(taken_events, options_.max_batch_events, options_.max_frame_bytes,
                          &sequence_, &next_event_, &out_, &frame_ends_);
    send_op_graph_.reset();
    send_layers_.clear();
    send_nan_origin_.reset();
    send_queue_.clear();
    send_events_ = 0;

    absl::Status s = socket_.has_value() ? socket_->WriteAll(out_, deadline)
                                         : absl::UnavailableError("not connected to tracetorchd");
    uint64_t evicted = 0;
    if (options_.replay_capacity > 0 && daemon_acks_) {
      for (const BatchFrame& f : frame_ends_) {
        evicted += replay_.Add(f.sequence, f.first_event, f.events,
                               std::string_view(out_).substr(f.begin, f.end - f.begin));
      }
    }
    {
      absl::MutexLock lock(&mu_);
      finished_ += taken;
      stats_.sent_events += next_event_ - first_position;
      stats_.dropped_events += framed.oversized;
      stats_.replay_evicted_events += evicted;
      stats_.replay_held_events = replay_.events();
      if (s.ok()) {
        stats_.batches_sent += framed.batches;
        stats_.bytes_sent += out_.size();
      }
    }
    if (!s.ok()) Disconnect(s.message());
  }

  // The daemon holds every batch up to `sequence` on disk.
  void Acknowledged(uint64_t sequence, uint64_t events) {
    replay_.Acknowledge(sequence);
    absl::MutexLock lock(&mu_);
    stats_.durable_events = std::max(stats_.durable_events, events);
    stats_.replay_held_events = replay_.events();
  }

  bool SendEnd(absl::Time deadline) {
    out_.clear();
    std::optional<double> total;
    uint64_t dropped, hook_errors;
    {
      absl::MutexLock lock(&mu_);
      total = total_time_ms_;
      dropped = DroppedLocked();
      hook_errors = hook_errors_;
    }
    wire::AppendEndFrame(total, dropped, hook_errors, &out_);
    absl::Status s = socket_->WriteAll(out_, deadline);
    if (!s.ok()) {
      Disconnect(s.message());
      return false;
    }
    socket_->ShutdownWrite();
    return true;
  }

  // After the End: reads the daemon's replies until every frame held is acknowledged (the daemon
  // answers the End with its final snapshot's Durable), the daemon closes the connection without
  // that (it could not write the snapshot), or `deadline`.
  void AwaitDurable(absl::Time deadline) {
    while (socket_.has_value() && !replay_.empty()) {
      ReadIncoming();
      if (replay_.empty() || !socket_.has_value() || !socket_->WaitReadable(deadline)) break;
    }
  }

  // Counts what is still queued as dropped: Close() gave up on it.
  void DropQueued() {
    absl::MutexLock lock(&mu_);
    const uint64_t left = queue_.Clear();
    stats_.dropped_events += left;
    finished_ += left;
    dropped_at_close_ += left;
  }

  // Drops whatever is still queued (counted), counts what the daemon did not confirm durable, and
  // records Close()'s result.
  void FinishClose(bool end_sent) {
    DropQueued();
    absl::MutexLock lock(&mu_);
    const uint64_t left = dropped_at_close_;
    stats_.not_durable_events = replay_.events();
    stats_.replay_held_events = replay_.events();
    if (end_sent && left == 0 && replay_.empty()) {
      close_status_ = absl::OkStatus();
    } else if (end_sent && left == 0) {
      close_status_ = absl::DeadlineExceededError(absl::StrCat(
          "tracetorchd at ", socket_path_, " took the session's end but did not confirm its last ",
          replay_.events(), " events durable (they are lost if it stops before writing them)"));
    } else {
      close_status_ = absl::DeadlineExceededError(
          absl::StrCat("tracetorchd at ", socket_path_, " did not take the session's end in time; ",
                       left, " queued events dropped", last_error_.empty() ? "" : " (", last_error_,
                       last_error_.empty() ? "" : ")"));
    }
    connected_ = false;
  }

  absl::Status Connect(absl::Time deadline) {
    absl::StatusOr<FrameSocket> socket =
        FrameSocket::ConnectUnix(socket_path_, deadline, &abort_io_);
    if (!socket.ok()) return socket.status();
    socket_ = *std::move(socket);

    // Hello and the full layer table, then wait for the Welcome.
    std::vector<LayerDecl> layers;
    wire::HelloFields hello;
    std::string resume;
    {
      absl::MutexLock lock(&mu_);
      layers = layers_;
      layers_sent_ = layers_.size();
      resume = session_id_;
      hello.dropped_events = DroppedLocked();
    }
    hello.sent_events = next_event_;
    if (options_.replay_capacity > 0) {
      hello.replay_first_event = replay_.FirstEvent(next_event_);
    }
    hello.identity = &options_.identity;
    hello.resume_session_id = resume;
    if (flight_fd_ >= 0) {
      hello.flight_layout_version = options_.flight_layout_version;
      hello.flight_region_bytes = options_.flight_region_bytes;
    }
    out_.clear();
    wire::AppendHelloFrame(hello, &out_);
    for (size_t i = 0; i < layers.size(); i += kLayersPerTableFrame) {
      const size_t n = std::min(kLayersPerTableFrame, layers.size() - i);
      wire::AppendLayerTableFrame(absl::MakeConstSpan(layers).subspan(i, n), &out_);
    }
    absl::Status s = socket_->WriteAllPassingFd(out_, flight_fd_, deadline);
    if (s.ok()) s = AwaitWelcome(deadline);
    if (s.ok()) s = Resend(deadline);
    if (!s.ok()) {
      CloseSocket();
      absl::MutexLock lock(&mu_);
      layers_sent_ = 0;  // Re-sent in full with the next Hello.
      return s;
    }
    absl::MutexLock lock(&mu_);
    connected_ = true;
    ++stats_.connects;
    last_error_.clear();
    return absl::OkStatus();
  }

  absl::Status AwaitWelcome(absl::Time deadline) {
    while (true) {
      absl::StatusOr<std::optional<wire::DaemonReply>> reply = NextReply();
      if (!reply.ok()) return reply.status();
      if (reply->has_value()) {
        const wire::DaemonReply& r = **reply;
        if (r.kind == wire::DaemonReply::Kind::kWelcome) {
          std::string previous;
          {
            absl::MutexLock lock(&mu_);
            previous = session_id_;
            session_id_ = r.session_id;
          }
          if (!r.resumed || r.session_id != previous) {
            // A new session (the first, or the daemon would not continue the old one): its stream
            // starts at 0, and what was held for the old one is no longer anyone's.
            next_event_ = 0;
            replay_.Clear();
          }
          // An older daemon acknowledges nothing and would count a re-sent event twice.
          daemon_acks_ = r.durable_sequence.has_value();
          if (!daemon_acks_) {
            replay_.Clear();
          } else {
            Acknowledged(*r.durable_sequence, r.durable_events);
          }
          return absl::OkStatus();
        }
        if (r.kind == wire::DaemonReply::Kind::kError) {
          absl::Status refused(static_cast<absl::StatusCode>(r.code),
                               absl::StrCat("tracetorchd refused the session: ", r.message));
          bool first_of_its_kind;
          {
            absl::MutexLock lock(&mu_);
            ++stats_.daemon_errors;
            ++stats_.refused_handshakes;
            first_of_its_kind = logged_refusals_.insert(r.code).second;
          }
          if (first_of_its_kind) Log(refused);
          return refused;
        }
        continue;
      }
      if (!socket_->WaitReadable(deadline)) {
        return absl::UnavailableError("tracetorchd did not answer the Hello in time");
      }
    }
  }

  // Writes again the held frames the daemon's Welcome did not acknowledge, oldest first.
  absl::Status Resend(absl::Time deadline) {
    if (replay_.empty()) return absl::OkStatus();
    out_.clear();
    const uint64_t events = replay_.AppendAll(&out_);
    absl::Status s = socket_->WriteAll(out_, deadline);
    if (s.ok()) {
      absl::MutexLock lock(&mu_);
      stats_.resent_events += events;
      stats_.replay_held_events = replay_.events();
    }
    return s;
  }

  // The next complete reply, without waiting; nullopt when none is complete yet; an error when the
  // connection ended or sent garbage.
  absl::StatusOr<std::optional<wire::DaemonReply>> NextReply() {
    absl::StatusOr<std::optional<std::string>> frame = socket_->ReadFrame();
    if (!frame.ok()) return frame.status();
    if (!frame->has_value()) return std::optional<wire::DaemonReply>();
    absl::StatusOr<wire::DaemonReply> reply = wire::ParseDaemonReply(**frame);
    if (!reply.ok()) return reply.status();
    return std::optional<wire::DaemonReply>(*std::move(reply));
  }

  // Handles IngestErrors the daemon sent since the handshake.
  void ReadIncoming() {
    while (socket_.has_value()) {
      absl::StatusOr<std::optional<wire::DaemonReply>> reply = NextReply();
      if (!reply.ok()) {
        Disconnect(reply.status().message());
        return;
      }
      if (!reply->has_value()) return;
      if ((*reply)->kind == wire::DaemonReply::Kind::kDurable) {
        Acknowledged((*reply)->durable_sequence.value_or(0), (*reply)->durable_events);
        continue;
      }
      if ((*reply)->kind == wire::DaemonReply::Kind::kError) {
        {
          absl::MutexLock lock(&mu_);
          ++stats_.daemon_errors;
          last_error_ = absl::StrCat("tracetorchd: ", (*reply)->message);
        }
        if ((*reply)->fatal) {
          Disconnect(absl::StrCat("tracetorchd closed the session: ", (*reply)->message));
          return;
        }
      }
    }
  }

  void Disconnect(absl::string_view reason) {
    CloseSocket();
    absl::MutexLock lock(&mu_);
    connected_ = false;
    layers_sent_ = 0;
    last_error_ = std::string(reason);
  }

  void CloseSocket() { socket_.reset(); }

  // One line for the host program's log: options_.log, else stderr.
  void Log(const absl::Status& status) {
    const std::string line =
        absl::StrCat("tracetorch: ", status.message(), " (", socket_path_, "; retrying)");
    if (options_.log) {
      options_.log(line);
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }

  const DaemonClientOptions options_;
  const std::string socket_path_;
  const int flight_fd_;  // Our duplicate of the flight recorder's memfd; -1: none.
  EventQueue queue_;     // The events; its own lock (event_queue.h says why).

  // Owned by the sender thread only.
  std::optional<FrameSocket> socket_;  // The connection, when there is one.
  uint64_t sequence_ = 0;
  std::string out_;           // Encoded frames.
  std::string send_queue_;    // Event fields taken from the queue...
  uint64_t send_events_ = 0;  // ...and how many.
  std::vector<LayerDecl> send_layers_;
  std::optional<NanOrigin> send_nan_origin_;
  std::vector<BatchFrame> frame_ends_;  // The event batch frames in out_.
  std::optional<std::string> send_op_graph_;
  ReplayBuffer replay_;       // Batch frames written and not yet acknowledged durable.
  uint64_t next_event_ = 0;   // The session's stream position of the next event batched.
  bool daemon_acks_ = false;  // The daemon's latest Welcome had a durable point.

  std::thread thread_;
  absl::Notification sender_done_;
  std::atomic<bool> abort_io_{false};

  mutable absl::Mutex mu_;
  std::vector<LayerDecl> layers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint32_t> layer_ids_ ABSL_GUARDED_BY(mu_);
  size_t layers_sent_ ABSL_GUARDED_BY(mu_) = 0;  // Prefix of layers_ sent on this connection.
  std::optional<NanOrigin> nan_origin_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> op_graph_ ABSL_GUARDED_BY(mu_);
  std::optional<double> total_time_ms_ ABSL_GUARDED_BY(mu_);
  uint64_t hook_errors_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t finished_ ABSL_GUARDED_BY(mu_) = 0;  // Events written or dropped, ever.
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t dropped_at_close_ ABSL_GUARDED_BY(mu_) = 0;  // Still queued when Close gave up.
  absl::Time close_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Status close_status_ ABSL_GUARDED_BY(mu_);
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  std::string session_id_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<int32_t> logged_refusals_ ABSL_GUARDED_BY(mu_);  // Status codes logged.
  DaemonClientStats stats_ ABSL_GUARDED_BY(mu_);
};

// ---- DaemonClient
// ---------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<DaemonClient>> DaemonClient::Create(DaemonClientOptions options) {
  if (options.address.empty()) options.address = protocol::DefaultDaemonAddress();
  absl::StatusOr<std::string> path = protocol::ParseDaemonAddress(options.address);
  if (!path.ok()) return path.status();
  if (options.queue_capacity == 0 || options.max_batch_events == 0) {
    return absl::InvalidArgumentError("queue_capacity and max_batch_events must be positive");
  }
  if (options.max_frame_bytes < 1024) {
    return absl::InvalidArgumentError("max_frame_bytes must be at least 1024");
  }
  int flight_fd = -1;
  if (options.flight_recorder_fd >= 0) {
    flight_fd = fcntl(options.flight_recorder_fd, F_DUPFD_CLOEXEC, 0);
    if (flight_fd < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot duplicate the flight recorder's descriptor ",
                       options.flight_recorder_fd, ": ", std::strerror(errno)));
    }
  }
  auto impl = std::make_unique<Impl>(std::move(options), *std::move(path), flight_fd);
  if (absl::Status s = impl->Start(); !s.ok()) return s;
  return std::unique_ptr<DaemonClient>(new DaemonClient(std::move(impl)));
}

DaemonClient::DaemonClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DaemonClient::~DaemonClient() {
  if (owner_.InForkedChild()) {
    // A forked child: the sender thread does not exist here and the mutex may be held by a thread
    // of the parent that was copied mid-call. Touch nothing; leak the copy.
    (void)impl_.release();
    return;
  }
  if (!impl_->closed()) (void)impl_->Close(absl::Seconds(1));
}

void DaemonClient::DeclareLayers(absl::Span<const LayerDecl> layers) {
  if (owner_.InForkedChild()) return;
  impl_->DeclareLayers(layers);
}

bool DaemonClient::EnqueueForward(ForwardEvent event) {
  if (owner_.InForkedChild()) return false;
  return impl_->EnqueueForward(std::move(event));
}

bool DaemonClient::EnqueueBackward(const BackwardEvent& event) {
  if (owner_.InForkedChild()) return false;
  return impl_->EnqueueBackward(event);
}

void DaemonClient::SetNanOrigin(const NanOrigin& origin) {
  if (owner_.InForkedChild()) return;
  impl_->SetNanOrigin(origin);
}

void DaemonClient::SetOpGraph(std::string op_graph_json) {
  if (owner_.InForkedChild()) return;
  impl_->SetOpGraph(std::move(op_graph_json));
}

void DaemonClient::SetEndInfo(std::optional<double> total_time_ms, uint64_t hook_errors) {
  if (owner_.InForkedChild()) return;
  impl_->SetEndInfo(total_time_ms, hook_errors);
}

absl::Status DaemonClient::Flush(absl::Duration timeout) {
  if (owner_.InForkedChild()) {
    return absl::FailedPreconditionError("tracetorchd client used in a forked child");
  }
  return impl_->Flush(timeout);
}

absl::Status DaemonClient::WaitUntilConnected(absl::Duration timeout) {
  if (owner_.InForkedChild()) {
    return absl::FailedPreconditionError("tracetorchd client used in a forked child");
  }
  return impl_->WaitUntilConnected(timeout);
}

absl::Status DaemonClient::Close(absl::Duration wait) {
  if (owner_.InForkedChild()) {
    return absl::FailedPreconditionError("tracetorchd client used in a forked child");
  }
  return impl_->Close(wait);
}

std::string DaemonClient::session_id() const {
  if (owner_.InForkedChild()) return "";
  return impl_->session_id();
}

DaemonClientStats DaemonClient::stats() const {
  if (owner_.InForkedChild()) return {};
  return impl_->stats();
}

}  // namespace tracetorch::client
