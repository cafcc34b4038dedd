// A job's view across its ranks (`tracetorch forensics --job JOB`): where each rank is and, for a
// hung job, which rank stopped moving first — the others are usually waiting behind it in a
// collective — and for a NaN, which rank (and layer) saw it first.
//
// The ranks come from each daemon's GetJob (service.proto JobResponse), or from a fleet store
// through one of them. "Stopped first": among the ranks that stopped (stalled, or aborted), the
// one whose position last changed earliest, by each process's own clock (FlightStatus
// .since_unix_ns; across nodes as good as their clocks' agreement). "NaN first": the lowest step
// of a NaN origin, then the earliest arrival.
//
// Thread-compatible; pure functions.
#ifndef TRACETORCH_CLI_JOB_FORENSICS_H_
#define TRACETORCH_CLI_JOB_FORENSICS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tracetorch/v1/service.pb.h"
#include "view/text.h"

namespace tracetorch::cli {

struct JobFindings {
  std::optional<size_t> first_stopped;  // Index into the ranks.
  std::vector<size_t> stopped_after;    // The other stopped ranks, in the order they stopped.
  std::optional<size_t> first_nan;
};

// One entry per rank (the latest session of each rank; ranks without one keep their sessions).
std::vector<v1::JobRank> LatestPerRank(std::vector<v1::JobRank> ranks);

JobFindings AnalyzeJob(const std::vector<v1::JobRank>& ranks);

// The view: a line per rank (daemon, state, where), then the findings. `now_unix_ns` for ages.
std::string RenderJobForensics(const std::string& job_id, const std::vector<v1::JobRank>& ranks,
                               const JobFindings& findings, const view::Style& style,
                               int64_t now_unix_ns);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_JOB_FORENSICS_H_
