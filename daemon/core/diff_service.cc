#include "daemon/core/diff_service.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "protocol/record_proto.h"
#include "protocol/session_info_proto.h"
#include "trace/diff.h"

namespace tracetorch::daemon {
namespace {

// One side of a diff (or the source of a baseline), resolved.
struct Resolved {
  TraceRecord record;
  std::vector<v1::LayerHistory> history;
  std::string description;  // "session <id>", "baseline <name>", "uploaded record".
};

// `role` ("baseline", "current", "source") prefixes every error, so the caller knows which side
// failed.
absl::Status Prefixed(absl::string_view role, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(role, ": ", s.message()));
}

absl::Status NoBaselines() {
  return absl::FailedPreconditionError(
      "this tracetorchd keeps no named baselines (start it with --data-dir)");
}

absl::StatusOr<Resolved> Resolve(const v1::DiffOperand& operand, absl::string_view role,
                                 const SessionManager& manager, BaselineStore* baselines) {
  Resolved out;
  switch (operand.source_case()) {
    case v1::DiffOperand::kSession: {
      const std::string& ref = operand.session().session_id();
      if (ref.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(role, ": a session id or \"latest\" is needed"));
      }
      absl::StatusOr<protocol::Snapshot> snap = manager.GetSnapshot(ref);
      if (!snap.ok()) {
        if (snap.status().code() == absl::StatusCode::kNotFound && ref != "latest") {
          return absl::NotFoundError(absl::StrCat(role, ": unknown session '", ref, "'"));
        }
        return Prefixed(role, snap.status());
      }
      out.record = std::move(snap->record);
      out.history.reserve(snap->history.layers.size());
      for (const LayerSteps& l : snap->history.layers)
        protocol::ToProto(l, &out.history.emplace_back());
      out.description = absl::StrCat("session ", snap->session.session_id);
      return out;
    }
    case v1::DiffOperand::kBaselineName: {
      if (baselines == nullptr) return Prefixed(role, NoBaselines());
      absl::StatusOr<Baseline> b = baselines->Get(operand.baseline_name());
      if (!b.ok()) return Prefixed(role, b.status());
      out.record = std::move(b->record);
      out.history = std::move(b->history);
      out.description = absl::StrCat("baseline ", operand.baseline_name());
      return out;
    }
    case v1::DiffOperand::kRecord:
      out.record = FromProto(operand.record());
      out.description = "uploaded record";
      return out;
    case v1::DiffOperand::kSnapshot:
      out.record = FromProto(operand.snapshot().record());
      out.history.assign(operand.snapshot().history().begin(), operand.snapshot().history().end());
      out.description = "uploaded snapshot";
      return out;
    case v1::DiffOperand::SOURCE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(role, ": no session, baseline name, record or snapshot given"));
}

LatencySamples SamplesOf(const std::vector<v1::LayerHistory>& history) {
  google::protobuf::RepeatedPtrField<v1::LayerHistory> field(history.begin(), history.end());
  return LatencySamplesFromHistory(field);
}

absl::Status RunDiff(const SessionManager& manager, BaselineStore* baselines,
                     const v1::DiffRequest& request, v1::DiffResponse* response) {
  DiffThresholds thresholds;
  if (request.has_latency_threshold()) thresholds.latency = request.latency_threshold();
  if (request.has_grad_norm_threshold()) thresholds.grad_norm = request.grad_norm_threshold();
  if (request.has_std_threshold()) thresholds.std = request.std_threshold();
  if (absl::Status s = thresholds.Validate(); !s.ok()) return s;

  absl::StatusOr<Resolved> baseline = Resolve(request.baseline(), "baseline", manager, baselines);
  if (!baseline.ok()) return baseline.status();
  absl::StatusOr<Resolved> current = Resolve(request.current(), "current", manager, baselines);
  if (!current.ok()) return current.status();

  const TraceDiff diff = DiffRecords(baseline->record, SamplesOf(baseline->history),
                                     current->record, SamplesOf(current->history), thresholds);
  ToProto(diff, response->mutable_diff());
  response->set_baseline_description(std::move(baseline->description));
  response->set_current_description(std::move(current->description));
  if (request.include_operands()) {
    for (auto [side, out] : {std::pair{&*baseline, response->mutable_baseline()},
                             std::pair{&*current, response->mutable_current()}}) {
      ToProto(side->record, out->mutable_record());
      for (v1::LayerHistory& h : side->history) *out->add_history() = std::move(h);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::BaselineInfo> RunSetBaseline(const SessionManager& manager,
                                                BaselineStore* baselines,
                                                const v1::SetBaselineRequest& request) {
  if (baselines == nullptr) return NoBaselines();
  if (absl::Status s = BaselineStore::ValidateName(request.name()); !s.ok()) return s;
  absl::StatusOr<Resolved> source = Resolve(request.source(), "source", manager, baselines);
  if (!source.ok()) return source.status();
  std::string from = source->description;
  if (request.source().source_case() == v1::DiffOperand::kRecord ||
      request.source().source_case() == v1::DiffOperand::kSnapshot) {
    from = "upload";  // BaselineInfo.source's spelling.
  }
  return baselines->Set(request.name(), source->record, std::move(source->history), from);
}

}  // namespace

absl::StatusOr<v1::DiffResponse> DiffService::Diff(const v1::DiffRequest& request) const {
  v1::DiffResponse response;
  if (absl::Status s = RunDiff(*manager_, baselines_, request, &response); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::BaselineInfo> DiffService::SetBaseline(
    const v1::SetBaselineRequest& request) const {
  return RunSetBaseline(*manager_, baselines_, request);
}

absl::StatusOr<std::vector<v1::BaselineInfo>> DiffService::ListBaselines() const {
  if (baselines_ == nullptr) return NoBaselines();
  return baselines_->List();
}

absl::Status DiffService::RemoveBaseline(absl::string_view name) const {
  if (baselines_ == nullptr) return NoBaselines();
  return baselines_->Remove(name);
}

}  // namespace tracetorch::daemon
