#include "daemon/core/fleet_registry.h"

#include <utility>

#include "protocol/session_info_proto.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {

FleetPublisher::FleetPublisher(FleetRegistry* registry, const SessionManager* manager,
                               std::string daemon)
    : registry_(registry), manager_(manager), daemon_(std::move(daemon)) {}

absl::Status FleetPublisher::PublishChanges(absl::Time now, absl::Duration refresh) {
  std::vector<FleetRank> changed;
  for (const protocol::SessionInfo& info : manager_->List()) {
    if (info.identity.job_id.empty()) continue;
    v1::SessionInfo message;
    protocol::ToProto(info, &message);
    std::string bytes = message.SerializeAsString();
    auto it = published_.find(info.session_id);
    const bool live = info.state == SessionState::kLive;
    if (it != published_.end() && it->second.info == bytes &&
        (!live || now - it->second.at < refresh)) {
      continue;
    }
    changed.push_back(FleetRank{.session_id = info.session_id,
                                .job_id = info.identity.job_id,
                                .daemon = daemon_,
                                .session_info = std::move(bytes),
                                .seen = now});
  }
  if (changed.empty()) return absl::OkStatus();
  if (absl::Status s = registry_->Publish(changed); !s.ok()) return s;
  for (FleetRank& r : changed) {
    published_[r.session_id] = Published{std::move(r.session_info), now};
  }
  return absl::OkStatus();
}

}  // namespace tracetorch::daemon
