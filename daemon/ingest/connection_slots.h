// The ingest listener's connection slots: at most `total` connections at once, and at most
// `per_uid` of them from one peer uid (SO_PEERCRED), so that one user filling the daemon with
// connections cannot lock another user's agents out.
//
// Under a flood of connections that never say Hello (a same-uid flood cannot be told apart from
// that uid's agents by the socket alone), a full set of slots makes room instead of refusing: the
// newcomer takes the slot of the oldest connection that has not completed its Hello (of its own
// uid at the per-uid limit, of any uid at the total limit), which the caller closes. A connection
// that has completed its Hello (Greeted) is never taken. So a real agent, which says Hello at once,
// gets in whatever idle connections exist, and only a full set of greeted connections refuses.
//
// Thread-compatible: the ingest server holds it under its own mutex.
#ifndef TRACETORCH_DAEMON_INGEST_CONNECTION_SLOTS_H_
#define TRACETORCH_DAEMON_INGEST_CONNECTION_SLOTS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace tracetorch::daemon {

class ConnectionSlots {
 public:
  // `per_uid` 0: a quarter of `total` (at least 1). `per_uid` is capped at `total`.
  ConnectionSlots(size_t total, size_t per_uid);

  struct Admission {
    uint64_t id = 0;  // The slot: pass it to Greeted() and Release().
    // When no slot was free: the connection whose slot this one took (see above). The caller
    // closes it; its Release() is then a no-op.
    std::optional<uint64_t> evicted;
    // At least three quarters of the uid's share or of the total are taken (this one included):
    // the caller gives the connection a short Hello deadline.
    bool scarce = false;
  };

  // Takes a slot for a connection from `uid`, making room as above when none is free.
  // ResourceExhausted, naming the limit (--max-connections or --max-connections-per-uid), when
  // every slot that could be taken holds a greeted connection; nothing is taken then.
  absl::StatusOr<Admission> Acquire(uint32_t uid);
  // The connection in slot `id` completed its Hello: its slot is no longer taken for room.
  void Greeted(uint64_t id);
  // Returns slot `id` (a no-op for one taken by another connection, or already returned).
  void Release(uint64_t id);

  size_t open() const { return slots_.size(); }
  size_t open_for(uint32_t uid) const;
  size_t per_uid() const { return per_uid_; }
  size_t waiting_for_hello() const { return pending_.size(); }

 private:
  struct Slot {
    uint32_t uid = 0;
    bool greeted = false;
  };
  void Forget(uint64_t id, const Slot& slot);

  const size_t total_;
  const size_t per_uid_;
  uint64_t next_id_ = 1;  // Ids grow with time: the smallest pending id is the oldest.
  absl::flat_hash_map<uint64_t, Slot> slots_;
  absl::flat_hash_map<uint32_t, size_t> by_uid_;  // Only uids with a connection open.
  std::set<uint64_t> pending_;                    // Slots without a Hello yet, all uids.
  absl::flat_hash_map<uint32_t, std::set<uint64_t>> pending_by_uid_;  // The same, by uid.
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_INGEST_CONNECTION_SLOTS_H_
