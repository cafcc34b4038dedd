// A job as the daemon sees it: every session sharing ProcessIdentity.job_id (one per rank), put
// side by side, with cross-rank divergence (trace/divergence.h) — a straggler or desynchronised
// rank.
//
// Thread-safe (reads the SessionManager).
#ifndef TRACETORCH_DAEMON_CORE_JOB_H_
#define TRACETORCH_DAEMON_CORE_JOB_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/core/session_manager.h"
#include "trace/divergence.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {

// The job's ranks (ordered by rank, then start time; for each rank the most recently started
// session), each a full Snapshot, and the divergence anomalies. NotFound when no session has this
// job id; InvalidArgument for an empty id.
absl::StatusOr<v1::JobSnapshot> BuildJobSnapshot(const SessionManager& manager,
                                                 std::string_view job_id,
                                                 const DivergenceThresholds& thresholds = {});

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_JOB_H_
