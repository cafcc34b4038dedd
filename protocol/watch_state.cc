// WatchState: a viewer's copy of a watched session or job, kept current from WatchUpdates.
#include "protocol/watch_state.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace tracetorch::protocol {
namespace {

// Merges `from` into `into` by `key(element)`: an element whose key is already present replaces
// it in place (keeping its position), a new key is appended in the order of `from`.
template <typename Element, typename KeyFn>
void MergeByKey(const google::protobuf::RepeatedPtrField<Element>& from,
                google::protobuf::RepeatedPtrField<Element>* into, KeyFn key) {
  if (from.empty()) return;
  absl::flat_hash_map<std::string, int> index;
  index.reserve(static_cast<size_t>(into->size()));
  for (int i = 0; i < into->size(); ++i) index.emplace(key(into->Get(i)), i);
  for (const Element& element : from) {
    auto it = index.find(key(element));
    if (it != index.end()) {
      into->Mutable(it->second)->CopyFrom(element);
    } else {
      index.emplace(key(element), into->size());
      into->Add()->CopyFrom(element);
    }
  }
}

// LayerHistory.thin_before_step on `into`: among its points whose step is < `before` (a prefix:
// steps increase), those at even positions are kept, the others dropped (every field alike).
void ThinHistory(uint64_t before, v1::LayerHistory* into) {
  int prefix = 0;
  while (prefix < into->steps_size() && into->steps(prefix) < before) ++prefix;
  auto thin = [prefix](auto* field) {
    const int n = field->size();
    const int end = std::min(prefix, n);
    int w = 0;
    for (int r = 0; r < end; r += 2) field->Set(w++, field->Get(r));
    for (int r = end; r < n; ++r) field->Set(w++, field->Get(r));
    field->Truncate(w);
  };
  thin(into->mutable_steps());
  thin(into->mutable_latency_ms());
  thin(into->mutable_output_std());
  thin(into->mutable_grad_norm());
  thin(into->mutable_non_finite());
}

// The points of `from` (LayerHistory.append) continue `into`: first `into` is thinned as
// from.thin_before_step says (when set), then its points whose step is >= from.steps(0) are
// dropped (every field cut at the same index), then `from`'s are appended.
void AppendHistory(const v1::LayerHistory& from, v1::LayerHistory* into) {
  if (from.thin_before_step() > 0) ThinHistory(from.thin_before_step(), into);
  if (from.steps().empty()) return;
  const uint64_t first = from.steps(0);
  int keep = into->steps_size();
  while (keep > 0 && into->steps(keep - 1) >= first) --keep;
  auto cut_and_append = [keep](const auto& tail, auto* field) {
    if (field->size() > keep) field->Truncate(keep);
    field->Add(tail.begin(), tail.end());
  };
  cut_and_append(from.steps(), into->mutable_steps());
  cut_and_append(from.latency_ms(), into->mutable_latency_ms());
  cut_and_append(from.output_std(), into->mutable_output_std());
  cut_and_append(from.grad_norm(), into->mutable_grad_norm());
  cut_and_append(from.non_finite(), into->mutable_non_finite());
}

// Checks a delta's history entries before anything is merged (Apply changes nothing on error):
// an appended entry needs the viewer's copy of that layer (or a whole one earlier in the delta)
// and parallel fields of one length.
absl::Status CheckHistoryDelta(uint64_t sequence, const v1::Snapshot& delta,
                               const v1::Snapshot& snapshot) {
  absl::flat_hash_set<std::string_view> held;
  for (const v1::LayerHistory& h : snapshot.history()) held.insert(h.full_name());
  for (const v1::LayerHistory& h : delta.history()) {
    if (!h.append()) {
      if (h.thin_before_step() > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("watch update ", sequence, " sends the whole history of layer \"",
                         h.full_name(), "\" with thin_before_step (only an append may thin)"));
      }
      held.insert(h.full_name());
      continue;
    }
    if (!held.contains(h.full_name())) {
      return absl::FailedPreconditionError(
          absl::StrCat("watch update ", sequence, " appends to the history of layer \"",
                       h.full_name(), "\", which this viewer does not hold (re-subscribe)"));
    }
    const int n = h.steps_size();
    if (h.latency_ms_size() != n || h.output_std_size() != n || h.grad_norm_size() != n ||
        h.non_finite_size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("watch update ", sequence, " appends to the history of layer \"",
                       h.full_name(), "\" with fields of different lengths"));
    }
  }
  return absl::OkStatus();
}

// A delta's history entries by full_name: an appended one continues the viewer's copy, a whole
// one replaces it in place or, for a new layer, is added at the end.
void MergeHistory(const google::protobuf::RepeatedPtrField<v1::LayerHistory>& from,
                  google::protobuf::RepeatedPtrField<v1::LayerHistory>* into) {
  if (from.empty()) return;
  absl::flat_hash_map<std::string, int> index;
  index.reserve(static_cast<size_t>(into->size()));
  for (int i = 0; i < into->size(); ++i) index.emplace(into->Get(i).full_name(), i);
  for (const v1::LayerHistory& h : from) {
    auto it = index.find(h.full_name());
    if (h.append()) {
      if (it != index.end()) AppendHistory(h, into->Mutable(it->second));  // Checked before.
      continue;
    }
    v1::LayerHistory* to = nullptr;
    if (it != index.end()) {
      to = into->Mutable(it->second);
    } else {
      index.emplace(h.full_name(), into->size());
      to = into->Add();
    }
    to->CopyFrom(h);
    to->clear_append();
  }
}

void MergeDelta(const v1::Snapshot& delta, v1::Snapshot* snapshot) {
  // Always complete in a delta: replace.
  *snapshot->mutable_session() = delta.session();
  v1::TraceRecord* record = snapshot->mutable_record();
  *record->mutable_metadata() = delta.record().metadata();
  *record->mutable_warnings() = delta.record().warnings();
  // Only what changed: merge by full_name.
  MergeByKey(delta.record().layers(), record->mutable_layers(),
             [](const v1::LayerTrace& layer) { return layer.full_name(); });
  MergeHistory(delta.history(), snapshot->mutable_history());
}

}  // namespace

absl::Status WatchState::Apply(const v1::WatchUpdate& update) {
  switch (update.kind_case()) {
    case v1::WatchUpdate::kFull:
      snapshot_ = update.full();
      break;
    case v1::WatchUpdate::kDelta:
      if (!snapshot_.has_value()) {
        return absl::FailedPreconditionError(
            absl::StrCat("watch update ", update.sequence(),
                         " is a delta but no full snapshot was received before it"));
      }
      if (absl::Status s = CheckHistoryDelta(update.sequence(), update.delta(), *snapshot_);
          !s.ok()) {
        return s;
      }
      MergeDelta(update.delta(), &*snapshot_);
      break;
    case v1::WatchUpdate::kSessionEnded:
      ended_ = update.session_ended();  // The snapshot stays as it was (header contract).
      break;
    case v1::WatchUpdate::kShutdown:
      shutdown_ = true;
      break;
    case v1::WatchUpdate::kJob:
      job_ = update.job();
      break;
    case v1::WatchUpdate::KIND_NOT_SET:
      return absl::InvalidArgumentError(
          absl::StrCat("watch update ", update.sequence(), " carries nothing"));
  }
  last_sequence_ = update.sequence();
  ++updates_;
  return absl::OkStatus();
}

}  // namespace tracetorch::protocol
