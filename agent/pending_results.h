// Results of device work that a hook must not wait for, collected once that work has completed.
//
// A hook that starts work on a device (a CUDA event pair timing a module call on the tensor's
// stream) pushes the result it will complete together with a Completion that says when the device
// is done; the agent collects later, on whichever thread comes by (the next step, a Snapshot(), the
// watch flusher), the results whose work has completed, in the order they were pushed, never
// waiting, except for Stop()'s bounded wait (TakeAll).
//
//   PendingResults<Sample> pending;
//   pending.Push(std::make_unique<EventCompletion>(...), sample);   // In the hook.
//   for (Sample& s : pending.TakeCompleted()) Aggregate(s);          // Later; never blocks.
//   pending.TakeAll(absl::Now() + absl::Seconds(2), &abandoned);     // At Stop().
//
// Device-agnostic: a CUDA event is one Completion (agent/cuda_support.h); ReadyCompletion is
// complete at once (the CPU mode of the Tracer, TracerOptions::deferred_cpu, routes CPU results
// through here so that CI exercises the machinery on every run); tests bring their own.
//
// Thread-safety: every method is thread-safe. The queue's mutex is held only for its bookkeeping
// and for Completion::Done() (which must not block), never while waiting: TakeAll takes the queue's
// contents out first and waits on them without it. A caller may hold its own locks around Push()
// and must hold none it needs elsewhere around TakeAll().
#ifndef TRACETORCH_AGENT_PENDING_RESULTS_H_
#define TRACETORCH_AGENT_PENDING_RESULTS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tracetorch::agent {

// Says when the device work behind one pending result has finished.
class Completion {
 public:
  virtual ~Completion() = default;
  // True once the work has finished. Must not block; may be called from any thread (one at a
  // time: PendingResults serialises the calls).
  virtual bool Done() = 0;
  // Waits until Done() or until `deadline`, and returns Done(). The default polls Done() with
  // short sleeps (a CUDA event has no wait with a timeout); used only by PendingResults::TakeAll.
  virtual bool WaitUntil(absl::Time deadline);
};

// Complete from the start: a result computed on the host, routed through the queue all the same.
class ReadyCompletion final : public Completion {
 public:
  bool Done() override { return true; }
  bool WaitUntil(absl::Time /*deadline*/) override { return true; }
};

// A FIFO of results waiting for their Completion. Memory: one entry per pushed result until it is
// taken; the owner bounds it by taking at every step (and Clear()).
template <typename T>
class PendingResults {
 public:
  // Queues `result` until `done` says its work has finished. `done` must not be null. An entry
  // that is not `counted` (a marker kept in order with the results: the Tracer's root calls)
  // leaves in order like the others but is not in in_flight() nor in TakeAll's `abandoned`.
  void Push(std::unique_ptr<Completion> done, T result, bool counted = true)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    entries_.push_back(Entry{std::move(done), std::move(result), counted});
    queued_.fetch_add(1, std::memory_order_relaxed);
    if (counted) in_flight_.fetch_add(1, std::memory_order_relaxed);
  }

  // The results at the front of the queue whose work has finished, in push order; stops at the
  // first one still running (later results wait behind it, so that results leave in the order
  // their work was issued). Never blocks on the device.
  std::vector<T> TakeCompleted() ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<T> out;
    if (queued() == 0) return out;
    absl::MutexLock lock(&mu_);
    while (!entries_.empty() && entries_.front().done->Done()) {
      if (entries_.front().counted) in_flight_.fetch_sub(1, std::memory_order_relaxed);
      out.push_back(std::move(entries_.front().result));
      entries_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    return out;
  }

  // Every queued result, in push order, waiting for each until `deadline` at the latest (without
  // the queue's mutex: Push() and in_flight() go on meanwhile). Results whose work had not finished
  // by the deadline are dropped and counted in `*abandoned` (if not null).
  std::vector<T> TakeAll(absl::Time deadline, int64_t* abandoned) ABSL_LOCKS_EXCLUDED(mu_) {
    std::deque<Entry> taken;
    {
      absl::MutexLock lock(&mu_);
      taken.swap(entries_);
    }
    std::vector<T> out;
    int64_t dropped = 0;
    int64_t counted = 0;
    for (Entry& e : taken) {
      if (e.counted) ++counted;
      if (e.done->WaitUntil(deadline)) {
        out.push_back(std::move(e.result));
      } else if (e.counted) {
        ++dropped;
      }
    }
    in_flight_.fetch_sub(counted, std::memory_order_relaxed);
    queued_.fetch_sub(static_cast<int64_t>(taken.size()), std::memory_order_relaxed);
    if (abandoned != nullptr) *abandoned += dropped;
    return out;
  }

  // Drops every queued result (a new session starts).
  void Clear() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (const Entry& e : entries_) {
      if (e.counted) in_flight_.fetch_sub(1, std::memory_order_relaxed);
    }
    queued_.fetch_sub(static_cast<int64_t>(entries_.size()), std::memory_order_relaxed);
    entries_.clear();
  }

  // Counted results pushed and not yet taken, those TakeAll() is waiting for included.
  // Lock-free.
  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  // Every entry pushed and not yet taken (markers included). Lock-free.
  int64_t queued() const { return queued_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    std::unique_ptr<Completion> done;
    T result;
    bool counted = true;
  };

  absl::Mutex mu_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> queued_{0};
};

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_PENDING_RESULTS_H_
