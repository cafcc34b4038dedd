#include "client/replay_buffer.h"

namespace tracetorch::client {

uint64_t ReplayBuffer::Add(uint64_t sequence, uint64_t first_event, uint64_t events,
                           std::string_view frame) {
  if (max_events_ == 0 || max_bytes_ == 0) return events;
  frames_.push_back({sequence, first_event, events, std::string(frame)});
  events_ += events;
  bytes_ += frame.size();
  uint64_t evicted = 0;
  while (!frames_.empty() && (events_ > max_events_ || bytes_ > max_bytes_)) {
    evicted += frames_.front().events;
    PopFront();
  }
  return evicted;
}

void ReplayBuffer::Acknowledge(uint64_t sequence) {
  while (!frames_.empty() && frames_.front().sequence <= sequence) PopFront();
}

void ReplayBuffer::Clear() {
  frames_.clear();
  events_ = 0;
  bytes_ = 0;
}

uint64_t ReplayBuffer::AppendAll(std::string* out) const {
  uint64_t events = 0;
  for (const Frame& f : frames_) {
    out->append(f.bytes);
    events += f.events;
  }
  return events;
}

void ReplayBuffer::PopFront() {
  events_ -= frames_.front().events;
  bytes_ -= frames_.front().bytes.size();
  frames_.pop_front();
}

}  // namespace tracetorch::client
