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

// The job's ranks, each a full Snapshot (read from disk for sessions no longer in memory: no
// history), and the divergence anomalies. For each rank the most recently started session, by
// rank; then the job's sessions without a rank, by start time. A session forgotten meanwhile is
// left out. NotFound when no session of the job is left; InvalidArgument for an empty id or
// invalid thresholds; a snapshot that cannot be read is its error (SessionManager::GetSnapshot).
absl::StatusOr<v1::JobSnapshot> BuildJobSnapshot(const SessionManager& manager,
                                                 std::string_view job_id,
                                                 const DivergenceThresholds& thresholds = {});

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_JOB_H_
