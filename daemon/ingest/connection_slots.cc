#include "daemon/ingest/connection_slots.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tracetorch::daemon {

ConnectionSlots::ConnectionSlots(size_t total, size_t per_uid)
    : total_(total),
      per_uid_(std::min(total, per_uid == 0 ? std::max<size_t>(1, total / 4) : per_uid)) {}

absl::StatusOr<ConnectionSlots::Admission> ConnectionSlots::Acquire(uint32_t uid) {
  Admission a;
  const size_t mine = open_for(uid);
  const bool uid_full = mine >= per_uid_;
  const bool total_full = slots_.size() >= total_;
  if (uid_full || total_full) {
    // Room from the oldest connection without a Hello: the uid's own when the uid is at its
    // share (its count must not grow), any uid's when only the total is reached.
    const std::set<uint64_t>* candidates = &pending_;
    if (uid_full) {
      auto it = pending_by_uid_.find(uid);
      candidates = it == pending_by_uid_.end() ? nullptr : &it->second;
    }
    if (candidates == nullptr || candidates->empty()) {
      if (uid_full) {
        return absl::ResourceExhaustedError(
            absl::StrCat("tracetorchd per-user connection limit reached: uid ", uid, " has ", mine,
                         " connections open (--max-connections-per-uid)"));
      }
      return absl::ResourceExhaustedError(
          absl::StrCat("tracetorchd connection limit reached: ", total_,
                       " connections open (--max-connections)"));
    }
    const uint64_t victim = *candidates->begin();
    auto it = slots_.find(victim);
    Forget(victim, it->second);
    slots_.erase(it);
    a.evicted = victim;
  }
  a.id = next_id_++;
  slots_[a.id] = Slot{uid, false};
  ++by_uid_[uid];
  pending_.insert(a.id);
  pending_by_uid_[uid].insert(a.id);
  a.scarce = by_uid_[uid] * 4 >= per_uid_ * 3 || slots_.size() * 4 >= total_ * 3;
  return a;
}

void ConnectionSlots::Greeted(uint64_t id) {
  auto it = slots_.find(id);
  if (it == slots_.end() || it->second.greeted) return;
  it->second.greeted = true;
  pending_.erase(id);
  auto p = pending_by_uid_.find(it->second.uid);
  p->second.erase(id);
  if (p->second.empty()) pending_by_uid_.erase(p);
}

void ConnectionSlots::Release(uint64_t id) {
  auto it = slots_.find(id);
  if (it == slots_.end()) return;
  Forget(id, it->second);
  slots_.erase(it);
}

void ConnectionSlots::Forget(uint64_t id, const Slot& slot) {
  if (!slot.greeted) {
    pending_.erase(id);
    auto p = pending_by_uid_.find(slot.uid);
    p->second.erase(id);
    if (p->second.empty()) pending_by_uid_.erase(p);
  }
  auto u = by_uid_.find(slot.uid);
  if (--u->second == 0) by_uid_.erase(u);
}

size_t ConnectionSlots::open_for(uint32_t uid) const {
  auto it = by_uid_.find(uid);
  return it == by_uid_.end() ? 0 : it->second;
}

}  // namespace tracetorch::daemon
