// The Tracer's deferred half (see agent/tracer.h): samples whose statistics or timing the device
// is still computing wait in the pending queues and are collected, in push order, once complete;
// the NaN origin of such a session is decided here, from the collected statistics.
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/deferred_stats.h"
#include "agent/tracer.h"
#include "agent/tracer_internal.h"

namespace tracetorch::agent {
namespace {

// A pending result is complete when every statistic it reads is on the host and, if given, the
// sample's own completion (a CUDA call's end event; a test's fake device) says so.
class StatsCompletion final : public Completion {
 public:
  StatsCompletion(std::vector<std::shared_ptr<DeferredStats>> stats,
                  std::unique_ptr<Completion> also)
      : stats_(std::move(stats)), also_(std::move(also)) {}
  bool Done() override {
    for (const std::shared_ptr<DeferredStats>& s : stats_) {
      if (!s->Done()) return false;
    }
    return also_ == nullptr || also_->Done();
  }
  bool WaitUntil(absl::Time deadline) override {
    for (const std::shared_ptr<DeferredStats>& s : stats_) {
      if (!s->WaitUntil(deadline)) return false;
    }
    return also_ == nullptr || also_->WaitUntil(deadline);
  }

 private:
  const std::vector<std::shared_ptr<DeferredStats>> stats_;
  const std::unique_ptr<Completion> also_;
};

// A CUDA call's sample is complete when the call's end event is.
class TimerCompletion final : public Completion {
 public:
  explicit TimerCompletion(DeviceTimer* timer) : timer_(timer) {}
  bool Done() override { return timer_->Ready(); }

 private:
  DeviceTimer* const timer_;  // Owned by the pending sample, which outlives this.
};

void AddNonNull(const std::vector<std::shared_ptr<DeferredStats>>& from,
                std::vector<std::shared_ptr<DeferredStats>>* to) {
  for (const std::shared_ptr<DeferredStats>& s : from) {
    if (s != nullptr) to->push_back(s);
  }
}

// Fills the statistics of `infos` from the deferred results beside them (null: already there).
void Fill(const std::vector<std::shared_ptr<DeferredStats>>& deferred, StatsMode mode,
          std::vector<TensorInfo>* infos) {
  for (size_t i = 0; i < deferred.size() && i < infos->size(); ++i) {
    if (deferred[i] != nullptr) tracer_internal::Attach(deferred[i]->Tensor(), mode, &(*infos)[i]);
  }
}

}  // namespace

void Tracer::DeferForward(CallState& c, ForwardSample sample,
                          std::vector<std::shared_ptr<DeferredStats>> output_stats) {
  std::unique_ptr<Completion> also;
  if (c.timer != nullptr) {
    // GPU time comes from the events, read when they complete (never a sync per module).
    also = std::make_unique<TimerCompletion>(c.timer.get());
  } else if (options_.cpu_completion) {
    also = options_.cpu_completion();
  }
  std::vector<std::shared_ptr<DeferredStats>> wait_for;
  AddNonNull(c.input_stats, &wait_for);
  AddNonNull(output_stats, &wait_for);
  ++results_deferred_;
  PendingForward p;
  p.kind = PendingForward::Kind::kSample;
  p.epoch = epoch_;
  p.layer = c.layer;
  p.step = c.step;
  p.seq = c.seq;
  p.is_root = c.is_root;
  p.sample = std::move(sample);
  p.input_stats = std::move(c.input_stats);
  p.output_stats = std::move(output_stats);
  p.timer = std::move(c.timer);
  pending_.Push(std::make_unique<StatsCompletion>(std::move(wait_for), std::move(also)),
                std::move(p));
}

void Tracer::PushRootMarker(const CallState& c, PendingForward::Kind kind,
                            std::vector<TensorInfo> tensors,
                            std::vector<std::shared_ptr<DeferredStats>> stats) {
  std::vector<std::shared_ptr<DeferredStats>> wait_for;
  PendingForward p;
  p.kind = kind;
  p.epoch = epoch_;
  p.step = c.step;
  p.seq = c.seq;
  p.is_root = true;
  AddNonNull(stats, &wait_for);
  if (kind == PendingForward::Kind::kRootBegin) {
    p.sample.inputs = std::move(tensors);
    p.input_stats = std::move(stats);
  } else {
    p.sample.outputs = std::move(tensors);
    p.output_stats = std::move(stats);
  }
  pending_.Push(std::make_unique<StatsCompletion>(std::move(wait_for), nullptr), std::move(p),
                /*counted=*/false);
}

void Tracer::DeferBackward(const BackwardCall& bc, BackwardSample sample,
                           std::shared_ptr<DeferredStats> in) {
  std::vector<std::shared_ptr<DeferredStats>> wait_for;
  if (bc.out_stats != nullptr) wait_for.push_back(bc.out_stats);
  if (in != nullptr) wait_for.push_back(in);
  ++results_deferred_;
  pending_backward_.Push(
      std::make_unique<StatsCompletion>(std::move(wait_for), nullptr),
      PendingBackward{bc.epoch, bc.layer, bc.step, std::move(sample), bc.out_stats, std::move(in)});
}

void Tracer::ApplyForward(PendingForward& p) const {
  using Kind = PendingForward::Kind;
  switch (p.kind) {
    case Kind::kRootBegin:
      NoteOrigin(origin_finder_.RootBegin(p.step, p.sample.inputs));
      return;
    case Kind::kRootEnd:
      NoteOrigin(origin_finder_.RootEnd(p.step, p.sample.outputs));
      return;
    case Kind::kSample:
      break;
  }
  NoteOrigin(origin_finder_.CallEnd(layer_names_[p.layer], p.step, p.seq, p.sample.inputs,
                                    p.sample.outputs));
  if (absl::Status s = AddForwardSample(p.layer, p.step, std::move(p.sample)); !s.ok()) {
    errors_.Record("add_forward", s.ToString());
  }
}

void Tracer::CollectPending(std::vector<PendingForward> forward,
                            std::vector<PendingBackward> backward) const {
  if (forward.empty() && backward.empty()) return;
  // Reading the host copies and the event times needs no lock.
  for (PendingForward& p : forward) {
    Fill(p.input_stats, stats_mode_, &p.sample.inputs);
    Fill(p.output_stats, stats_mode_, &p.sample.outputs);
    p.input_stats.clear();
    p.output_stats.clear();
    if (p.timer == nullptr) continue;
    if (std::optional<double> ms = p.timer->ElapsedMs(/*wait=*/false)) p.sample.latency_ms = *ms;
    p.timer.reset();  // Frees the events outside mu_.
  }
  for (PendingBackward& p : backward) {
    if (p.out != nullptr) {
      const GradStats g = p.out->Grad();
      p.sample.grad_norm = g.norm;
      p.sample.grad_mean = g.mean;
      p.sample.grad_has_nan = g.has_nan;
      p.sample.grad_all_zero = g.all_zero;
    }
    if (p.in != nullptr) {
      const GradStats g = p.in->Grad();
      p.sample.grad_in_norm = g.norm;
      p.sample.grad_in_mean = g.mean;
      p.sample.grad_in_has_nan = g.has_nan;
    }
  }
  // The collection lock (held by the caller) keeps the order the hooks pushed in.
  absl::MutexLock lock(&mu_);
  for (PendingForward& p : forward) {
    if (p.epoch == epoch_) ApplyForward(p);  // Else of an earlier Start(): reset since.
  }
  for (PendingBackward& p : backward) {
    if (p.epoch == epoch_) AddBackwardSample(p.layer, p.step, p.sample);
  }
}

void Tracer::CollectCompleted() const {
  if (pending_.queued() == 0 && pending_backward_.queued() == 0) return;
  // One collector at a time (results leave in push order); a busy one means someone collects.
  if (!collect_mu_.TryLock()) return;
  CollectPending(pending_.TakeCompleted(), pending_backward_.TakeCompleted());
  collect_mu_.Unlock();
}

void Tracer::CollectAll(absl::Time deadline) {
  int64_t abandoned = 0;
  {
    absl::MutexLock collect(&collect_mu_);
    std::vector<PendingForward> forward = pending_.TakeAll(deadline, &abandoned);
    CollectPending(std::move(forward), pending_backward_.TakeAll(deadline, &abandoned));
  }
  if (abandoned > 0) {
    results_abandoned_.fetch_add(abandoned, std::memory_order_relaxed);
    errors_.Record("results_abandoned",
                   absl::StrCat(abandoned, " samples still on the device when Stop() gave up"));
  }
}

}  // namespace tracetorch::agent
