#include "daemon/core/history.h"

#include <algorithm>

namespace tracetorch::daemon {
namespace {
constexpr size_t kSearchBack = 8;
}  // namespace

HistoryPoint* LayerHistory::PointFor(uint64_t step) {
  const size_t n = points_.size();
  for (size_t i = 0; i < std::min(n, kSearchBack); ++i) {
    HistoryPoint& p = points_[n - 1 - i];
    if (p.step == step) return &p;
    if (p.step < step) break;
  }
  if (n > 0 && points_.back().step > step) return nullptr;
  if (n >= thin_at_) {
    // Thin the older half: keep every other point.
    const size_t half = n / 2;
    thin_boundary_ = points_[half].step;
    size_t w = 0;
    for (size_t r = 0; r < half; r += 2) points_[w++] = points_[r];
    for (size_t r = half; r < n; ++r) points_[w++] = points_[r];
    points_.resize(w);
    ++thinnings_;
    thin_at_ = capacity_;
  }
  points_.push_back(HistoryPoint{});
  points_.back().step = step;
  return &points_.back();
}

void LayerHistory::RecordForward(uint64_t step, std::optional<double> latency_ms,
                                 std::optional<double> output_std, bool non_finite,
                                 uint64_t stamp) {
  HistoryPoint* p = PointFor(step);
  if (p == nullptr) return;
  p->stamp = stamp;
  if (latency_ms) p->latency_ms = *latency_ms;
  if (output_std) p->output_std = *output_std;
  p->non_finite = p->non_finite || non_finite;
}

void LayerHistory::RecordBackward(uint64_t step, std::optional<double> grad_norm, bool non_finite,
                                  uint64_t stamp) {
  HistoryPoint* p = PointFor(step);
  if (p == nullptr) return;
  p->stamp = stamp;
  if (grad_norm) p->grad_norm = *grad_norm;
  p->non_finite = p->non_finite || non_finite;
}

}  // namespace tracetorch::daemon
