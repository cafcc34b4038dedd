// The agent's replay buffer: the batch frames it wrote to the daemon and that the daemon has not
// yet acknowledged as durable (agent.proto, "Durability and re-send"), oldest first, kept exactly
// as written so that a re-send is byte for byte the first send. Bounded by events and by bytes:
// adding beyond either drops the oldest frames, and says how many events they held (never
// acknowledged: the daemon counts them as lost if it had not made them durable).
//
// Thread-compatible: the sender thread owns it.
//
// Example:
//   ReplayBuffer replay(/*max_events=*/1 << 16, /*max_bytes=*/32 << 20);
//   evicted += replay.Add(sequence, first_event, events, frame);
//   replay.Acknowledge(durable_sequence);  // A Durable from the daemon.
//   replay.AppendAll(&out);                // After a reconnect.
#ifndef TRACETORCH_CLIENT_REPLAY_BUFFER_H_
#define TRACETORCH_CLIENT_REPLAY_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

namespace tracetorch::client {

class ReplayBuffer {
 public:
  ReplayBuffer(size_t max_events, size_t max_bytes)
      : max_events_(max_events), max_bytes_(max_bytes) {}

  // Keeps a frame (batch `sequence`, `events` events from stream position `first_event`), then
  // drops the oldest frames while over a bound; returns the events of the frames dropped (the new
  // one's too when it alone is over a bound; with a bound of 0 nothing is kept).
  uint64_t Add(uint64_t sequence, uint64_t first_event, uint64_t events, std::string_view frame);
  // Forgets the frames of sequence up to `sequence`: the daemon holds them on disk.
  void Acknowledge(uint64_t sequence);
  void Clear();

  // The stream position of the oldest frame held; `next` (the position of the next event to be
  // batched) when none is.
  uint64_t FirstEvent(uint64_t next) const {
    return frames_.empty() ? next : frames_.front().first;
  }
  // Appends every frame held to `out`, oldest first; returns their events.
  uint64_t AppendAll(std::string* out) const;

  bool empty() const { return frames_.empty(); }
  uint64_t events() const { return events_; }
  size_t bytes() const { return bytes_; }

 private:
  struct Frame {
    uint64_t sequence;
    uint64_t first;
    uint64_t events;
    std::string bytes;
  };
  void PopFront();

  const size_t max_events_;
  const size_t max_bytes_;
  std::deque<Frame> frames_;
  uint64_t events_ = 0;
  size_t bytes_ = 0;
};

}  // namespace tracetorch::client

#endif  // TRACETORCH_CLIENT_REPLAY_BUFFER_H_
