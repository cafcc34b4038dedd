#include "daemon/ingest/connection_slots.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tracetorch::daemon {

ConnectionSlots::ConnectionSlots(size_t total, size_t per_uid)
    : total_(total),
      per_uid_(std::min(total, per_uid == 0 ? std::max<size_t>(1, total / 4) : per_uid)) {}

absl::Status ConnectionSlots::Acquire(uint32_t uid) {
  if (open_ >= total_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tracetorchd connection limit reached: ", total_, " connections open (--max-connections)"));
  }
  size_t& mine = by_uid_[uid];
  if (mine >= per_uid_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tracetorchd per-user connection limit reached: uid ", uid, " has ", mine,
                     " connections open (--max-connections-per-uid)"));
  }
  ++mine;
  ++open_;
  return absl::OkStatus();
}

void ConnectionSlots::Release(uint32_t uid) {
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  if (--it->second == 0) by_uid_.erase(it);
  --open_;
}

size_t ConnectionSlots::open_for(uint32_t uid) const {
  auto it = by_uid_.find(uid);
  return it == by_uid_.end() ? 0 : it->second;
}

}  // namespace tracetorch::daemon
