#include "daemon/core/watch_viewer.h"

#include <algorithm>
#include <utility>

namespace tracetorch::daemon {

absl::Time WatchTickAtOrAfter(absl::Time t, absl::Duration interval, absl::Duration phase) {
  const int64_t iv = std::max<int64_t>(1, absl::ToInt64Nanoseconds(interval));
  const int64_t offset = absl::ToInt64Nanoseconds(phase) % iv;
  const int64_t ns = absl::ToUnixNanos(t) - offset;
  int64_t q = ns / iv;
  if (q * iv < ns) ++q;
  return absl::FromUnixNanos(q * iv + offset);
}

WatchViewer::WatchViewer(absl::Duration interval, absl::Time now, absl::Duration phase)
    : interval_(interval), tick_phase_(phase), next_due_(now) {}

absl::Time WatchViewer::NextDue(absl::Time now, bool on_tick) const {
  return on_tick ? WatchTickAtOrAfter(std::max(next_due_ + interval_, now), interval_, tick_phase_)
                 : WatchTickAtOrAfter(now + interval_, interval_, tick_phase_);
}

absl::Time WatchViewer::wake_at() const {
  return phase_ == Phase::kStreaming ? next_due_ : absl::InfiniteFuture();
}

WatchViewer::Step WatchViewer::Of(Step::Kind kind) {
  Step step;
  step.kind = kind;
  return step;
}

WatchViewer::Step WatchViewer::Close(absl::Status status) {
  Step step;
  step.kind = Step::Kind::kClose;
  step.status = std::move(status);
  return step;
}

WatchViewer::Step WatchViewer::Send(Step::Kind kind) {
  Step step = Of(kind);
  step.sequence = next_sequence_++;
  return step;
}

WatchViewer::Step WatchViewer::Next(const Link& link, const Pass& pass,
                                    absl::FunctionRef<uint64_t()> version) {
  if (pass.force_close) {
    return Close(phase_ == Phase::kTerminal && !link.writing
                     ? absl::OkStatus()
                     : absl::UnavailableError("tracetorchd is shutting down"));
  }
  if (link.failed || link.cancelled) {
    next_due_ = absl::InfiniteFuture();  // No more ticks: its write completing wakes the hub.
    if (link.writing) return Of(Step::Kind::kWakeOnWrite);
    return Close(absl::CancelledError("the viewer went away"));
  }
  if (link.writing) {
    if (pass.shutting_down || phase_ != Phase::kStreaming) return Of(Step::Kind::kWakeOnWrite);
    Step step;
    if (pass.now >= next_due_) {
      // A tick while the viewer is still writing: the newer state waits, replacing an older
      // waiting one (whose sequence number is then skipped).
      const uint64_t now_version = version();
      if (now_version != (pending_ ? pending_version_ : base_)) {
        if (pending_) {
          step.coalesced = true;
          ++next_sequence_;
        }
        pending_ = true;
        pending_version_ = now_version;
      }
      next_due_ = NextDue(pass.now, /*on_tick=*/true);
    }
    if (pending_) step.kind = Step::Kind::kWakeOnWrite;
    return step;
  }
  if (pass.shutting_down) {
    if (phase_ == Phase::kTerminal) return Close(absl::OkStatus());
    phase_ = Phase::kTerminal;
    return Send(Step::Kind::kSendShutdown);
  }
  switch (phase_) {
    case Phase::kTerminal:
      return Close(absl::OkStatus());
    case Phase::kEnding:
      phase_ = Phase::kTerminal;
      return Send(Step::Kind::kSendEnded);
    case Phase::kFirst:
      on_tick_ = false;
      wanted_ = pending_ ? pending_version_ : version();
      return Of(Step::Kind::kSendState);
    case Phase::kStreaming:
      break;
  }
  if (pending_) {
    on_tick_ = false;
    wanted_ = pending_version_;
    return Of(Step::Kind::kSendState);
  }
  if (pass.now < next_due_) return Of(Step::Kind::kNothing);
  on_tick_ = true;
  wanted_ = version();
  if (wanted_ == base_) {  // Nothing changed: nothing sent.
    next_due_ = NextDue(pass.now, /*on_tick=*/true);
    return Of(Step::Kind::kNothing);
  }
  return Of(Step::Kind::kSendState);
}

uint64_t WatchViewer::StateSent(uint64_t version, std::optional<v1::SessionInfo> ended,
                                absl::Time now) {
  const bool first = phase_ == Phase::kFirst;
  base_ = version;
  pending_ = false;
  next_due_ = NextDue(now, !first && on_tick_);
  if (ended.has_value()) {
    phase_ = Phase::kEnding;
    ended_ = *std::move(ended);
  } else {
    phase_ = Phase::kStreaming;
  }
  return next_sequence_++;
}

void WatchViewer::StateNotReady(absl::Time now) {
  pending_ = true;
  pending_version_ = wanted_;
  // Its tick passed (or a later one while it waited): the next one, so that the hub does not
  // spin on a tick already served. The preparation's end wakes the hub anyway.
  if (now >= next_due_) next_due_ = NextDue(now, /*on_tick=*/true);
}

}  // namespace tracetorch::daemon
