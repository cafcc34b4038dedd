// The daemon's global ingest-memory budget: every byte of connection read buffer beyond each
// connection's small base buffer is reserved here before it is allocated, so that the total held
// for frames being read stays under one limit however many connections claim large frames.
//
// A connection reserves what its frame still needs all at once (never a bit more while holding a
// part, which could deadlock a full budget) and releases it when the frame is done. A reservation
// that does not fit waits; waiters are served in arrival order, so a large frame is not starved
// by a stream of smaller ones. While a connection waits it does not read: its peer meets the
// socket's backpressure (the agent's own queue then drops and counts, as designed).
//
// Thread-safe. Close() wakes every waiter with a refusal (shutdown).
#ifndef TRACETORCH_DAEMON_INGEST_INGEST_BUDGET_H_
#define TRACETORCH_DAEMON_INGEST_INGEST_BUDGET_H_

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tracetorch::daemon {

struct IngestBudgetStats {
  size_t limit_bytes = 0;
  size_t reserved_bytes = 0;       // Held now (gauge).
  size_t peak_reserved_bytes = 0;  // Most ever held at once.
  uint64_t waits = 0;              // Reservations that had to wait for others to release.
  size_t waiting = 0;              // Reservations waiting now (gauge).
};

class IngestMemoryBudget {
 public:
  explicit IngestMemoryBudget(size_t limit_bytes) : limit_(limit_bytes) {}
  IngestMemoryBudget(const IngestMemoryBudget&) = delete;
  IngestMemoryBudget& operator=(const IngestMemoryBudget&) = delete;

  // Reserves `bytes`, waiting (in arrival order) until they fit under the limit. False, with
  // nothing reserved, when the budget is closed (before or while waiting) or when `bytes` alone
  // exceed the limit (it could never fit).
  bool Reserve(size_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Returns `bytes` reserved earlier.
  void Release(size_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Refuses every waiting and later Reserve().
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  IngestBudgetStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t limit() const { return limit_; }

  // For tests: blocks until `n` reservations are waiting, or until at least `bytes` are reserved.
  void AwaitWaitingForTesting(size_t n) const ABSL_LOCKS_EXCLUDED(mu_);
  void AwaitReservedForTesting(size_t bytes) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const size_t limit_;

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  size_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  size_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t waits_ ABSL_GUARDED_BY(mu_) = 0;
  // Arrival order: a waiter takes a ticket; only the one at serving_ may reserve.
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t serving_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_INGEST_INGEST_BUDGET_H_
