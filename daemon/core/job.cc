#include "daemon/core/job.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "protocol/job_divergence.h"
#include "protocol/session_info_proto.h"

namespace tracetorch::daemon {

absl::StatusOr<v1::JobSnapshot> BuildJobSnapshot(const SessionManager& manager,
                                                 std::string_view job_id,
                                                 const DivergenceThresholds& thresholds) {
  if (job_id.empty()) return absl::InvalidArgumentError("empty job id");
  if (absl::Status s = thresholds.Validate(); !s.ok()) return s;

  // List() is oldest first: a later session of the same rank replaces an earlier one.
  const std::vector<protocol::SessionInfo> sessions = manager.List(job_id);
  if (sessions.empty()) {
    return absl::NotFoundError(absl::StrCat("no session of job '", std::string(job_id), "'"));
  }
  std::map<int32_t, const protocol::SessionInfo*> by_rank;
  std::vector<const protocol::SessionInfo*> without_rank;
  for (const protocol::SessionInfo& info : sessions) {
    if (!info.identity.rank.has_value()) {
      without_rank.push_back(&info);
      continue;
    }
    const protocol::SessionInfo*& slot = by_rank[*info.identity.rank];
    if (slot == nullptr || info.started >= slot->started) slot = &info;
  }
  std::stable_sort(without_rank.begin(), without_rank.end(),
                   [](const protocol::SessionInfo* a, const protocol::SessionInfo* b) {
                     return a->started < b->started;
                   });
  std::vector<const protocol::SessionInfo*> chosen;
  for (const auto& [rank, info] : by_rank) chosen.push_back(info);
  chosen.insert(chosen.end(), without_rank.begin(), without_rank.end());

  v1::JobSnapshot job;
  job.set_job_id(std::string(job_id));
  for (const protocol::SessionInfo* info : chosen) {
    absl::StatusOr<protocol::Snapshot> snapshot = manager.GetSnapshot(info->session_id);
    // Forgotten between List and GetSnapshot (index trimmed, snapshot file gone): leave it out.
    if (absl::IsNotFound(snapshot.status())) continue;
    if (!snapshot.ok()) return snapshot.status();
    protocol::ToProto(*snapshot, job.add_ranks());
  }
  if (job.ranks().empty()) {
    return absl::NotFoundError(absl::StrCat("no session of job '", std::string(job_id), "'"));
  }

  protocol::AddRankDivergences(thresholds, &job);
  return job;
}

}  // namespace tracetorch::daemon
