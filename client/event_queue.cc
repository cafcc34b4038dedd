#include "client/event_queue.h"

#include <utility>

#include "absl/time/clock.h"
#include "protocol/wire.h"

namespace tracetorch::client {

namespace wire = protocol::wire;

EventQueue::EventQueue(size_t capacity, uint32_t max_frame_bytes, size_t batch_events)
    : capacity_(capacity), max_frame_bytes_(max_frame_bytes), batch_events_(batch_events) {}

bool EventQueue::PushForward(const protocol::ForwardEvent& event) {
  Hold hold(&mu_);
  if (refusing_ || queued_ >= capacity_) {
    ++dropped_;
    return false;
  }
  return AcceptLocked(wire::AppendForwardEventField(event, &events_));
}

bool EventQueue::PushBackward(const protocol::BackwardEvent& event) {
  Hold hold(&mu_);
  if (refusing_ || queued_ >= capacity_) {
    ++dropped_;
    return false;
  }
  return AcceptLocked(wire::AppendBackwardEventField(event, &events_));
}

bool EventQueue::AcceptLocked(size_t bytes) {
  if (bytes + wire::kMaxEncodedBatchOverheadBytes > max_frame_bytes_) {
    events_.resize(events_.size() - bytes);
    ++dropped_;
    return false;
  }
  ++accepted_;
  // One wakeup per batch_events events, not one per event.
  if (++queued_ == batch_events_) wake_.notify_one();
  return true;
}

uint64_t EventQueue::Take(absl::Time deadline, std::string* events) {
  events->clear();
  std::unique_lock<std::mutex> lock(mu_.native());
  // The analysis cannot follow unique_lock over native(): what follows holds mu_.
  auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return refusing_ || woken_ || queued_ >= batch_events_;
  };
  wake_.wait_until(lock, absl::ToChronoTime(deadline), ready);
  return [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    woken_ = false;
    std::swap(events_, *events);
    return std::exchange(queued_, 0);
  }();
}

void EventQueue::Wake() {
  {
    Hold hold(&mu_);
    woken_ = true;
  }
  wake_.notify_one();
}

void EventQueue::Refuse() {
  {
    Hold hold(&mu_);
    refusing_ = true;
  }
  wake_.notify_one();
}

uint64_t EventQueue::Clear() {
  Hold hold(&mu_);
  events_.clear();
  return std::exchange(queued_, 0);
}

uint64_t EventQueue::size() const {
  Hold hold(&mu_);
  return queued_;
}

uint64_t EventQueue::accepted() const {
  Hold hold(&mu_);
  return accepted_;
}

uint64_t EventQueue::dropped() const {
  Hold hold(&mu_);
  return dropped_;
}

}  // namespace tracetorch::client
