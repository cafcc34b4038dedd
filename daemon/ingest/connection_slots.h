// The ingest listener's connection slots: at most `total` connections at once, and at most
// `per_uid` of them from one peer uid (SO_PEERCRED), so that one user filling the daemon with
// connections cannot lock another user's agents out.
//
// Thread-compatible: the ingest server holds it under its own mutex.
#ifndef TRACETORCH_DAEMON_INGEST_CONNECTION_SLOTS_H_
#define TRACETORCH_DAEMON_INGEST_CONNECTION_SLOTS_H_

#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace tracetorch::daemon {

class ConnectionSlots {
 public:
  // `per_uid` 0: a quarter of `total` (at least 1). `per_uid` is capped at `total`.
  ConnectionSlots(size_t total, size_t per_uid);

  // Takes a slot for a connection from `uid`. ResourceExhausted, naming the limit
  // (--max-connections or --max-connections-per-uid), when none is free; nothing is taken then.
  absl::Status Acquire(uint32_t uid);
  // Returns a slot Acquire() gave `uid`.
  void Release(uint32_t uid);

  size_t open() const { return open_; }
  size_t open_for(uint32_t uid) const;
  size_t per_uid() const { return per_uid_; }

 private:
  const size_t total_;
  const size_t per_uid_;
  size_t open_ = 0;
  absl::flat_hash_map<uint32_t, size_t> by_uid_;  // Only uids with a connection open.
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_INGEST_CONNECTION_SLOTS_H_
