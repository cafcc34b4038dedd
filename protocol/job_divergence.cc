#include "protocol/job_divergence.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "protocol/record_proto.h"

namespace tracetorch::protocol {

void AddRankDivergences(const DivergenceThresholds& thresholds, v1::JobSnapshot* job) {
  std::vector<TraceRecord> records;
  records.reserve(static_cast<size_t>(job->ranks_size()));
  for (const v1::Snapshot& s : job->ranks()) records.push_back(FromProto(s.record()));
  std::vector<RankTrace> ranks;
  ranks.reserve(records.size());
  for (int i = 0; i < job->ranks_size(); ++i) {
    const v1::SessionInfo& info = job->ranks(i).session();
    RankTrace r;
    r.record = &records[static_cast<size_t>(i)];
    if (info.identity().has_rank()) {
      r.rank = info.identity().rank();
      r.label = absl::StrCat("rank ", r.rank);
    } else {
      r.rank = -1;
      r.label = absl::StrCat("session ", info.session_id());
    }
    ranks.push_back(std::move(r));
  }
  for (const Anomaly& a : DetectRankDivergence(ranks, thresholds)) {
    ToProto(a, job->add_divergences());
  }
}

}  // namespace tracetorch::protocol
