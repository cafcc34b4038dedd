// The client library's queue of events waiting for the sender thread: each event encoded as it is
// queued (protocol/wire.h: its EventBatch field), bounded in events, taken by the sender all at
// once. What DaemonClient's Enqueue* do on the hook's thread happens here.
//
// The lock is a std::mutex, not absl::Mutex, because it is taken once per event: Debian's Abseil
// is built with deadlock detection on, and an absl::Mutex Lock/Unlock pair costs ~60 ns there
// against ~6-10 ns for std::mutex (measured on the development machine), more than encoding the
// event. The wrapper below keeps clang's thread-safety analysis.
//
// Thread-safe: Push* from any number of threads; Take from one (the sender) at a time.
#ifndef TRACETORCH_CLIENT_EVENT_QUEUE_H_
#define TRACETORCH_CLIENT_EVENT_QUEUE_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "protocol/events.h"

namespace tracetorch::client {

class EventQueue {
 public:
  // `capacity`: events queued at most; `max_frame_bytes`: an event whose field cannot fit in a
  // frame of this many payload bytes is refused; `batch_events`: queued events that end a Take's
  // wait. Requires: all three positive.
  EventQueue(size_t capacity, uint32_t max_frame_bytes, size_t batch_events);
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Encode and queue one event; false (counted in dropped()) when the queue is full, refusing
  // (Refuse()) or the event is too large for a frame. Never waits for the sender.
  bool PushForward(const protocol::ForwardEvent& event) ABSL_LOCKS_EXCLUDED(mu_);
  bool PushBackward(const protocol::BackwardEvent& event) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until batch_events events are queued, Wake() or Refuse() was called, or `deadline`;
  // then moves everything queued into `*events` (its previous content is discarded; its capacity
  // comes back with a later Take) and returns how many events that is.
  uint64_t Take(absl::Time deadline, std::string* events) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the current or the next Take's wait at once.
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);
  // From now on every Push is refused (and counted); Take no longer waits.
  void Refuse() ABSL_LOCKS_EXCLUDED(mu_);
  // Drops what is queued (not counted in dropped(): the caller counts it); returns how many.
  uint64_t Clear() ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t size() const ABSL_LOCKS_EXCLUDED(mu_);      // Events queued now.
  uint64_t accepted() const ABSL_LOCKS_EXCLUDED(mu_);  // Events queued, ever.
  uint64_t dropped() const ABSL_LOCKS_EXCLUDED(mu_);   // Pushes refused, ever.

 private:
  // std::mutex with the annotations clang's analysis needs.
  class ABSL_LOCKABLE Lock {
   public:
    void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { m_.lock(); }
    void unlock() ABSL_UNLOCK_FUNCTION() { m_.unlock(); }
    std::mutex& native() { return m_; }

   private:
    std::mutex m_;
  };
  class ABSL_SCOPED_LOCKABLE Hold {
   public:
    explicit Hold(Lock* l) ABSL_EXCLUSIVE_LOCK_FUNCTION(l) : l_(l) { l_->lock(); }
    ~Hold() ABSL_UNLOCK_FUNCTION() { l_->unlock(); }

   private:
    Lock* const l_;
  };

  // Takes the event whose `bytes` were just appended to events_, or removes them again.
  bool AcceptLocked(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  const uint32_t max_frame_bytes_;
  const size_t batch_events_;

  mutable Lock mu_;
  std::condition_variable wake_;             // Waited on by Take; with mu_.native().
  std::string events_ ABSL_GUARDED_BY(mu_);  // Event fields, in the order they came.
  uint64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t accepted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  bool refusing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tracetorch::client

#endif  // TRACETORCH_CLIENT_EVENT_QUEUE_H_
