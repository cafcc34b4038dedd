// The CI diff service as plain C++ (service.proto: Diff, SetBaseline, ListBaselines,
// RemoveBaseline). The gRPC adapter (daemon/rpc/service.h) only converts its Status.
//
// Each side of a diff (or the source of a baseline) is resolved from a DiffOperand:
//   session      through the SessionManager ("latest" or an id), with its per-step history;
//   baseline     a named baseline through the BaselineStore;
//   record       what the caller uploaded (no history);
//   snapshot     an uploaded Snapshot (record and history).
// Then the core diff (trace/diff.h) runs, with the noise-aware latency rule wherever both sides
// have history. With include_operands, the response also carries both sides (record and history)
// as resolved.
//
// Errors in resolving an operand name its side ("baseline: ...", "current: ...", "source: ..."):
// InvalidArgument for an empty operand, an empty session id or a bad baseline name; NotFound for
// an unknown session ("latest" without sessions too) or baseline; FailedPrecondition for a baseline
// operand on a daemon that keeps none (no data directory); what the SessionManager or
// BaselineStore returns otherwise. Errors of the request itself name no side: InvalidArgument for
// thresholds that are negative or not finite (checked first) and for a bad SetBaseline name.
//
// Thread-safe: holds no state of its own beyond its (thread-safe) dependencies.
#ifndef TRACETORCH_DAEMON_CORE_DIFF_SERVICE_H_
#define TRACETORCH_DAEMON_CORE_DIFF_SERVICE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/baseline_store.h"
#include "daemon/core/session_manager.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {

class DiffService {
 public:
  // `manager` is required; `baselines` may be null (no named baselines). Neither is owned; both
  // must outlive the service.
  DiffService(const SessionManager* manager, BaselineStore* baselines)
      : manager_(manager), baselines_(baselines) {}

  // The baseline side is resolved first: when both fail, its error is the one returned.
  absl::StatusOr<v1::DiffResponse> Diff(const v1::DiffRequest& request) const;
  // Stores the source as `request.name` (replacing one of that name); BaselineInfo.source reads
  // "session <id>", "baseline <name>" or "upload" (a record or snapshot).
  absl::StatusOr<v1::BaselineInfo> SetBaseline(const v1::SetBaselineRequest& request) const;
  // By name. FailedPrecondition without a data directory.
  absl::StatusOr<std::vector<v1::BaselineInfo>> ListBaselines() const;
  // NotFound when there is none; InvalidArgument for a bad name; FailedPrecondition without a
  // data directory.
  absl::Status RemoveBaseline(absl::string_view name) const;

 private:
  const SessionManager* const manager_;
  BaselineStore* const baselines_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_DIFF_SERVICE_H_
