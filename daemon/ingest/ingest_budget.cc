#include "daemon/ingest/ingest_budget.h"

#include <algorithm>

namespace tracetorch::daemon {

bool IngestMemoryBudget::Reserve(size_t bytes) {
  if (bytes == 0) return true;
  if (bytes > limit_) return false;
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  const uint64_t ticket = next_ticket_++;
  auto my_turn = [this, ticket, bytes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || (ticket == serving_ && limit_ - reserved_ >= bytes);
  };
  if (!my_turn()) {
    ++waits_;
    mu_.Await(absl::Condition(&my_turn));
  }
  ++serving_;  // The next waiter's turn, whether this one reserved or was refused.
  if (closed_) return false;
  reserved_ += bytes;
  peak_ = std::max(peak_, reserved_);
  return true;
}

void IngestMemoryBudget::Release(size_t bytes) {
  absl::MutexLock lock(&mu_);
  reserved_ -= std::min(bytes, reserved_);
}

void IngestMemoryBudget::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

IngestBudgetStats IngestMemoryBudget::stats() const {
  absl::MutexLock lock(&mu_);
  IngestBudgetStats s;
  s.limit_bytes = limit_;
  s.reserved_bytes = reserved_;
  s.peak_reserved_bytes = peak_;
  s.waits = waits_;
  s.waiting = static_cast<size_t>(next_ticket_ - serving_);
  return s;
}

void IngestMemoryBudget::AwaitWaitingForTesting(size_t n) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return next_ticket_ - serving_ >= n; };
  mu_.Await(absl::Condition(&enough));
}

void IngestMemoryBudget::AwaitReservedForTesting(size_t bytes) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, bytes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reserved_ >= bytes; };
  mu_.Await(absl::Condition(&enough));
}

}  // namespace tracetorch::daemon
