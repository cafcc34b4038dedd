#include "daemon/core/job.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "protocol/job_divergence.h"

namespace tracetorch::daemon {

absl::StatusOr<v1::JobSnapshot> BuildJobSnapshot(const SessionManager& manager,
                                                 std::string_view job_id,
                                                 const DivergenceThresholds& thresholds) {
  if (job_id.empty()) return absl::InvalidArgumentError("empty job id");
  if (absl::Status s = thresholds.Validate(); !s.ok()) return s;

  // List() is oldest first: a later session of the same rank replaces an earlier one.
  const std::vector<v1::SessionInfo> sessions = manager.List(job_id);
  if (sessions.empty()) {
    return absl::NotFoundError(absl::StrCat("no session of job '", std::string(job_id), "'"));
  }
  std::map<int32_t, const v1::SessionInfo*> by_rank;
  std::vector<const v1::SessionInfo*> without_rank;
  for (const v1::SessionInfo& info : sessions) {
    if (!info.identity().has_rank()) {
      without_rank.push_back(&info);
      continue;
    }
    const v1::SessionInfo*& slot = by_rank[info.identity().rank()];
    if (slot == nullptr || info.started_unix_ns() >= slot->started_unix_ns()) slot = &info;
  }
  std::stable_sort(without_rank.begin(), without_rank.end(),
                   [](const v1::SessionInfo* a, const v1::SessionInfo* b) {
                     return a->started_unix_ns() < b->started_unix_ns();
                   });
  std::vector<const v1::SessionInfo*> chosen;
  for (const auto& [rank, info] : by_rank) chosen.push_back(info);
  chosen.insert(chosen.end(), without_rank.begin(), without_rank.end());

  v1::JobSnapshot job;
  job.set_job_id(std::string(job_id));
  for (const v1::SessionInfo* info : chosen) {
    absl::StatusOr<v1::Snapshot> snapshot = manager.GetSnapshot(info->session_id());
    // Forgotten between List and GetSnapshot (index trimmed, snapshot file gone): leave it out.
    if (absl::IsNotFound(snapshot.status())) continue;
    if (!snapshot.ok()) return snapshot.status();
    *job.add_ranks() = *std::move(snapshot);
  }
  if (job.ranks().empty()) {
    return absl::NotFoundError(absl::StrCat("no session of job '", std::string(job_id), "'"));
  }

  protocol::AddRankDivergences(thresholds, &job);
  return job;
}

}  // namespace tracetorch::daemon
