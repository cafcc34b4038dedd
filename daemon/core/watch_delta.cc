#include "daemon/core/watch_delta.h"

#include <algorithm>
#include <vector>

namespace tracetorch::daemon {
namespace {

// The version at `k` of a parallel vector, 0 past its end (never changed).
uint64_t At(const std::vector<uint64_t>& versions, size_t k) {
  return k < versions.size() ? versions[k] : 0;
}

// Walks entries in order and says whether each is new since `base`; false once an entry new since
// `base` comes before an older one (the order a viewer merging by name cannot rebuild).
class OrderCheck {
 public:
  explicit OrderCheck(uint64_t base) : base_(base) {}
  // Whether entry `k` is new since `base`; sets broken() when it breaks the order.
  bool IsNew(const std::vector<uint64_t>& born, size_t k) {
    const bool is_new = At(born, k) > base_;
    if (seen_new_ && !is_new) broken_ = true;
    seen_new_ = seen_new_ || is_new;
    return is_new;
  }
  bool broken() const { return broken_; }

 private:
  const uint64_t base_;
  bool seen_new_ = false;
  bool broken_ = false;
};

// The record's layers changed after `base` (or new since), appended to `to`; false when the order
// breaks (OrderCheck).
bool AppendChangedLayers(const Session::WatchView& view, const v1::Snapshot& full, uint64_t base,
                         google::protobuf::RepeatedPtrField<v1::LayerTrace>* to) {
  const auto& from = full.record().layers();
  OrderCheck order(base);
  for (int i = 0; i < from.size(); ++i) {
    const size_t k = static_cast<size_t>(i);
    const bool is_new = order.IsNew(view.layer_born, k);
    if (order.broken()) return false;
    if (is_new || At(view.layer_changed, k) > base) *to->Add() = from.Get(i);
  }
  return true;
}

// History entry `k` (changed since `base`, not new), as the points the viewer lacks, appended to
// `to`: an append (after a replayed thinning when there was exactly one since `base`), the whole
// entry when the viewer's copy cannot be continued, or nothing when no point changed.
void AppendHistoryEntry(const Session::WatchView& view, const v1::LayerHistory& h, size_t k,
                        uint64_t base, google::protobuf::RepeatedPtrField<v1::LayerHistory>* to) {
  const bool thinned = k >= view.history_thinned.size() || view.history_thinned[k] > base;
  // Thinned exactly once since `base`: the viewer's copy is a prefix of the history just before
  // that thinning (but for points changed since, which are sent), so it can replay it.
  const bool thinned_once =
      thinned && k < view.history_thinned.size() && k < view.history_thinned_before.size() &&
      view.history_thinned_before[k] <= base && At(view.history_thin_boundary, k) > 0;
  if ((thinned && !thinned_once) || k >= view.history_point_changed.size()) {
    *to->Add() = h;
    return;
  }
  const std::vector<uint64_t>& stamps = view.history_point_changed[k];
  const int n = std::min(h.steps_size(), static_cast<int>(stamps.size()));
  int first = 0;
  while (first < n && stamps[static_cast<size_t>(first)] <= base) ++first;
  // Only the layer changed (an event for a step out of reach): nothing to send, unless the
  // thinning must still reach the viewer.
  if (first == n && !thinned_once) return;
  v1::LayerHistory* a = to->Add();
  a->set_full_name(h.full_name());
  a->set_append(true);
  if (thinned_once) a->set_thin_before_step(view.history_thin_boundary[k]);
  auto tail = [first](const auto& field, auto* out) {
    out->Reserve(std::max(0, field.size() - first));
    for (int j = first; j < field.size(); ++j) out->Add(field.Get(j));
  };
  tail(h.steps(), a->mutable_steps());
  tail(h.latency_ms(), a->mutable_latency_ms());
  tail(h.output_std(), a->mutable_output_std());
  tail(h.grad_norm(), a->mutable_grad_norm());
  tail(h.non_finite(), a->mutable_non_finite());
}

// The history entries changed after `base`, appended to `to`; false when the order breaks.
bool AppendChangedHistory(const Session::WatchView& view, const v1::Snapshot& full, uint64_t base,
                          google::protobuf::RepeatedPtrField<v1::LayerHistory>* to) {
  const auto& from = full.history();
  OrderCheck order(base);
  for (int i = 0; i < from.size(); ++i) {
    const size_t k = static_cast<size_t>(i);
    const bool is_new = order.IsNew(view.history_born, k);
    if (order.broken()) return false;
    if (is_new) {
      *to->Add() = from.Get(i);
    } else if (At(view.history_changed, k) > base) {
      AppendHistoryEntry(view, from.Get(i), k, base, to);
    }
  }
  return true;
}

}  // namespace

std::optional<v1::Snapshot> BuildWatchDelta(const Session::WatchView& view,
                                            const v1::Snapshot& full, uint64_t base) {
  const v1::Snapshot& f = full;
  v1::Snapshot d;
  *d.mutable_session() = f.session();
  v1::TraceRecord* r = d.mutable_record();
  *r->mutable_metadata() = f.record().metadata();
  *r->mutable_warnings() = f.record().warnings();
  if (!AppendChangedLayers(view, full, base, r->mutable_layers()) ||
      !AppendChangedHistory(view, full, base, d.mutable_history())) {
    return std::nullopt;
  }
  return d;
}

}  // namespace tracetorch::daemon
