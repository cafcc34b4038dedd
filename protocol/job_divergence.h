// Cross-rank divergence of a job as the service reports it (v1::JobSnapshot): one labelling of the
// ranks ("rank N", or "session ID" for a session without a rank) and the core rule
// (trace/divergence.h), shared by the daemon's job view (daemon/core/job.cc) and the CLI's view of
// a job across several daemons (cli/multi_job_watch.cc), so that their findings read the same.
//
// Thread-safe: a pure function.
#ifndef TRACETORCH_PROTOCOL_JOB_DIVERGENCE_H_
#define TRACETORCH_PROTOCOL_JOB_DIVERGENCE_H_

#include "trace/divergence.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::protocol {

// Appends to job->divergences what DetectRankDivergence finds over job->ranks (in their order).
void AddRankDivergences(const DivergenceThresholds& thresholds, v1::JobSnapshot* job);

}  // namespace tracetorch::protocol

#endif  // TRACETORCH_PROTOCOL_JOB_DIVERGENCE_H_
