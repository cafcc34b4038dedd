#include "daemon/core/session.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/crash_point.h"
#include "daemon/core/data_dir.h"
#include "protocol/codes.h"
#include "protocol/frame_decoder.h"
#include "protocol/session_info_proto.h"
#include "trace/atomic_file.h"
#include "trace/forward_passes.h"
#include "trace/json.h"
#include "trace/op_graph.h"
#include "trace/op_graph_json.h"

namespace tracetorch::daemon {
namespace {

// Memory is bounded whatever the agent sends: see kMaxLatestTensors. Storage within the caps is
// kept for the next call's tensors (DecodeForwardTensors decodes in place).
void CapTensors(std::vector<TensorInfo>* tensors) {
  if (tensors->size() > kMaxLatestTensors) tensors->resize(kMaxLatestTensors);
  for (TensorInfo& t : *tensors) {
    if (t.shape.size() > kMaxTensorDims) t.shape.resize(kMaxTensorDims);
    if (t.shape.capacity() > kMaxTensorDims) t.shape.shrink_to_fit();
  }
  if (tensors->capacity() > kMaxLatestTensors) tensors->shrink_to_fit();
}

// Replaces a layer's latest tensors with those of its forward event `bytes`, within the caps.
void DecodeLatestTensors(std::string_view bytes, std::vector<TensorInfo>* inputs,
                         std::vector<TensorInfo>* outputs) {
  protocol::wire::DecodeForwardTensors(bytes, inputs, outputs);
  CapTensors(inputs);
  CapTensors(outputs);
}

TraceMetadata MetadataFromIdentity(const protocol::ProcessIdentity& id) {
  TraceMetadata m;
  m.model_name = id.model_name;
  m.pytorch_version = id.torch_version;
  m.python_version = id.python_version;
  m.platform = id.platform;
  m.cuda_available = id.cuda_available;
  if (!id.cuda_version.empty()) m.cuda_version = id.cuda_version;
  if (!id.active_device.empty()) m.active_device = id.active_device;
  return m;
}

std::optional<double> MinOpt(std::optional<double> a, std::optional<double> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}
std::optional<double> MaxOpt(std::optional<double> a, std::optional<double> b) {
  if (!a) return b;
  if (!b) return a;
  return std::max(*a, *b);
}
std::optional<double> WeightedMean(std::optional<double> a, int64_t na, std::optional<double> b,
                                   int64_t nb) {
  if (!a || na <= 0) return b;
  if (!b || nb <= 0) return a;
  return (*a * static_cast<double>(na) + *b * static_cast<double>(nb)) /
         static_cast<double>(na + nb);
}

LayerTrace MergeLayer(const LayerTrace& a, const LayerTrace& b) {
  LayerTrace out = a;
  if (b.forward_count > 0) {
    out.inputs = b.inputs;
    out.outputs = b.outputs;
    out.latency_ms = b.latency_ms;
    out.latency_ms_min = MinOpt(a.latency_ms_min, b.latency_ms_min);
    out.latency_ms_max = MaxOpt(a.latency_ms_max, b.latency_ms_max);
    out.latency_ms_mean =
        WeightedMean(a.latency_ms_mean, a.forward_count, b.latency_ms_mean, b.forward_count);
    out.fwd_mem_alloc_delta = b.fwd_mem_alloc_delta;
    out.fwd_mem_reserved_delta = b.fwd_mem_reserved_delta;
  }
  out.forward_count = a.forward_count + b.forward_count;
  out.has_nan = a.has_nan || b.has_nan;
  out.has_inf = a.has_inf || b.has_inf;
  out.inf_in_masks_only = a.has_inf && b.has_inf ? a.inf_in_masks_only && b.inf_in_masks_only
                          : a.has_inf            ? a.inf_in_masks_only
                                                 : b.inf_in_masks_only;
  if (b.backward_count > 0) {
    out.grad_norm = b.grad_norm;
    out.grad_mean = b.grad_mean;
    out.grad_in_norm = b.grad_in_norm;
    out.grad_in_mean = b.grad_in_mean;
    out.bwd_latency_ms = b.bwd_latency_ms;
    out.bwd_latency_ms_min = MinOpt(a.bwd_latency_ms_min, b.bwd_latency_ms_min);
    out.bwd_latency_ms_max = MaxOpt(a.bwd_latency_ms_max, b.bwd_latency_ms_max);
    out.bwd_latency_ms_mean = WeightedMean(a.bwd_latency_ms_mean, a.backward_count,
                                           b.bwd_latency_ms_mean, b.backward_count);
    out.bwd_mem_alloc_delta = b.bwd_mem_alloc_delta;
    out.bwd_mem_reserved_delta = b.bwd_mem_reserved_delta;
  }
  out.backward_count = a.backward_count + b.backward_count;
  out.grad_has_nan = a.grad_has_nan || b.grad_has_nan;
  out.has_zero_grad = a.has_zero_grad || b.has_zero_grad;
  out.grad_in_has_nan = a.grad_in_has_nan || b.grad_in_has_nan;
  return out;
}

}  // namespace

std::string_view ToString(SessionState state) {
  switch (state) {
    case SessionState::kLive:
      return "live";
    case SessionState::kFinished:
      return "finished";
    case SessionState::kAborted:
      return "aborted";
  }
  return "unknown";
}

TraceRecord MergeRecords(const TraceRecord& before, const TraceRecord& after) {
  TraceRecord out;
  out.metadata = after.metadata;
  if (!out.metadata.nan_origin) out.metadata.nan_origin = before.metadata.nan_origin;
  if (!out.metadata.total_time_ms) out.metadata.total_time_ms = before.metadata.total_time_ms;
  out.op_graph = after.op_graph != nullptr ? after.op_graph : before.op_graph;
  absl::flat_hash_map<std::string_view, const LayerTrace*> after_by_name;
  for (const LayerTrace& l : after.layers) after_by_name[l.full_name] = &l;
  absl::flat_hash_map<std::string_view, bool> seen;
  out.layers.reserve(before.layers.size() + after.layers.size());
  for (const LayerTrace& l : before.layers) {
    auto it = after_by_name.find(l.full_name);
    out.layers.push_back(it == after_by_name.end() ? l : MergeLayer(l, *it->second));
    seen[l.full_name] = true;
  }
  for (const LayerTrace& l : after.layers) {
    if (!seen.contains(l.full_name)) out.layers.push_back(l);
  }
  return out;
}

Session::Session(std::string id, const protocol::Hello& hello, PeerCredentials peer,
                 absl::Time started, SessionLimits limits, Thresholds thresholds,
                 std::optional<Restored> restored)
    : id_(std::move(id)),
      started_(started),
      limits_(limits),
      thresholds_(thresholds),
      restored_(std::move(restored)),
      aggregator_(MetadataFromIdentity(hello.identity)),
      identity_(hello.identity),
      peer_(peer) {
  client_dropped_ = hello.dropped_events;
  if (restored_.has_value()) {
    const protocol::SessionIndexEntry& entry = restored_->entry;
    events_ = entry.info.events;
    rejected_events_ = entry.info.rejected_events;
    lost_events_ = entry.lost_events;
    last_sequence_ = entry.last_sequence;
    client_dropped_ = std::max(client_dropped_, entry.client_dropped_events);
    // What was restored is on disk; what the agent wrote beyond it and cannot re-send is lost.
    durable_ = {last_sequence_, events_ + rejected_events_ + lost_events_};
    absl::MutexLock lock(&mu_);  // For the analysis: nobody else sees the session yet.
    AccountHelloLocked(hello);
    TraceMetadata m = aggregator_.metadata();
    if (!m.nan_origin) m.nan_origin = restored_->record.metadata.nan_origin;
    aggregator_.SetMetadata(std::move(m));
  }
}

absl::Status Session::DeclareLayers(absl::Span<const protocol::LayerDecl> layers) {
  absl::MutexLock lock(&mu_);
  ++changes_;
  for (const protocol::LayerDecl& decl : layers) {
    const LayerInfo& declared = decl.info;
    // Ids are dense in practice; allow some slack, but never let an id size our tables.
    const size_t id_limit = limits_.max_layers * 4;
    if (decl.id >= id_limit) {
      return absl::InvalidArgumentError(absl::StrCat("layer id ", decl.id, " (\"",
                                                     declared.full_name, "\") is not below ",
                                                     id_limit, " (4 x the layer limit)"));
    }
    if (declared.name.size() > kMaxLayerNameBytes || declared.type.size() > kMaxLayerNameBytes ||
        declared.full_name.size() > kMaxLayerNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat("layer id ", decl.id,
                                                     ": a name, type or full name is longer than ",
                                                     kMaxLayerNameBytes, " bytes"));
    }
    const size_t wire = decl.id;
    const std::string& full_name = declared.full_name.empty() ? declared.name : declared.full_name;
    if (wire < wire_names_.size() && agg_ids_[wire] >= 0) {
      if (wire_names_[wire] == full_name) continue;  // Re-declared (reconnect): already known.
      return absl::InvalidArgumentError(absl::StrCat("layer id ", wire, " re-declared as \"",
                                                     full_name, "\"; it was \"", wire_names_[wire],
                                                     "\""));
    }
    if (static_cast<size_t>(aggregator_.declared_layers()) >= limits_.max_layers) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "session ", id_, " declares more than ", limits_.max_layers, " layers (--max-layers)"));
    }
    LayerInfo info = declared;
    info.full_name = full_name;
    absl::StatusOr<TraceAggregator::LayerId> id = aggregator_.DeclareLayer(info);
    if (!id.ok()) return id.status();
    if (wire >= agg_ids_.size()) {
      agg_ids_.resize(wire + 1, -1);
      wire_names_.resize(wire + 1);
    }
    agg_ids_[wire] = *id;
    wire_names_[wire] = info.full_name;
    while (history_.size() <= static_cast<size_t>(*id)) {
      const size_t capacity = std::max<size_t>(limits_.history_steps, 4);
      history_.emplace_back(capacity, LayerHistory::Stagger(history_.size(), capacity));
      layer_changed_.push_back(0);
      layer_born_.push_back(0);
      history_born_.push_back(0);
      history_thinned_.push_back(0);
      history_thinned_before_.push_back(0);
    }
  }
  return absl::OkStatus();
}

void Session::TouchLayerLocked(int32_t id, bool history_was_empty, uint64_t thinnings_before) {
  const size_t i = static_cast<size_t>(id);
  layer_changed_[i] = changes_;
  if (layer_born_[i] == 0) layer_born_[i] = changes_;
  if (history_was_empty && !history_[i].points().empty()) history_born_[i] = changes_;
  const uint64_t thinnings = history_[i].thinnings() - thinnings_before;
  if (thinnings > 0) {
    history_thinned_before_[i] = thinnings > 1 ? changes_ : history_thinned_[i];
    history_thinned_[i] = changes_;
  }
}

// AddBatchBytes' pass over a batch's events, as a visitor of the frame decoder. It runs under the
// session's lock (AssertHeld tells the analysis so).
// The first `skip` events visited are re-sent ones the session already holds: counted as
// duplicates and not applied.
class Session::ApplyPass : public protocol::wire::EventBatchVisitor {
 public:
  ApplyPass(Session* s, TraceAggregator::Batch* agg, BatchOutcome* out, uint64_t skip)
      : s_(s), agg_(agg), out_(out), skip_(skip) {}
  void OnForward(const protocol::wire::ForwardFields& e) override {
    s_->mu_.AssertHeld();
    if (Skip()) return;
    s_->ApplyForwardLocked(e, *agg_, out_);
  }
  void OnBackward(const protocol::BackwardEvent& e) override {
    s_->mu_.AssertHeld();
    if (Skip()) return;
    s_->ApplyBackwardLocked(e, *agg_, out_);
  }

 private:
  bool Skip() {
    if (skip_ == 0) return false;
    --skip_;
    ++out_->duplicates;
    return true;
  }

  Session* const s_;
  TraceAggregator::Batch* const agg_;
  BatchOutcome* const out_;
  uint64_t skip_;
};

int32_t Session::AggIdLocked(uint32_t wire) const {
  return wire < agg_ids_.size() ? agg_ids_[wire] : -1;
}

void Session::RejectLocked(uint32_t wire, BatchOutcome* out) const {
  ++out->rejected;
  if (out->error.ok()) {
    out->error = absl::InvalidArgumentError(
        absl::StrCat("event for undeclared layer id ", wire, " in session ", id_));
  }
}

void Session::ApplyForwardLocked(const protocol::wire::ForwardFields& e,
                                 TraceAggregator::Batch& agg, BatchOutcome* out) {
  const int32_t id = AggIdLocked(e.layer_id);
  if (id < 0) {
    RejectLocked(e.layer_id, out);
    return;
  }
  ForwardSample s;
  s.latency_ms = e.latency_ms;
  // A batch holds many calls of each layer, and a record keeps only the latest call's tensors:
  // only each layer's last forward event in the batch has its tensors decoded, after the pass
  // (AddBatchBytes), from the bytes remembered here.
  s.tensors_omitted = true;
  s.outputs_had_nan = e.outputs_have_nan;
  s.outputs_had_inf = e.outputs_have_inf;
  s.outputs_inf_in_masks_only = e.outputs_inf_in_masks_only;
  s.mem_alloc_delta = e.mem_alloc_delta;
  s.mem_reserved_delta = e.mem_reserved_delta;
  if (e.step < static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    forward_passes_ = std::max(forward_passes_, static_cast<int64_t>(e.step) + 1);
  }
  LayerHistory& history = history_[static_cast<size_t>(id)];
  const bool history_was_empty = history.points().empty();
  const uint64_t thinnings = history.thinnings();
  // A point is marked when the step's outputs carried trouble (trace/nonfinite.h): masks are not.
  history.RecordForward(e.step, s.latency_ms, e.first_output_std,
                        e.outputs_have_nan || (e.outputs_have_inf && !e.outputs_inf_in_masks_only),
                        changes_);
  TouchLayerLocked(id, history_was_empty, thinnings);
  if (absl::Status st = agg.AddForward(id, std::move(s)); !st.ok()) {
    RejectLocked(e.layer_id, out);
    return;
  }
  std::string_view& last = last_forward_bytes_[static_cast<size_t>(id)];
  if (last.data() == nullptr) touched_layers_.push_back(id);
  last = e.bytes;
  ++out->accepted;
}

void Session::ApplyBackwardLocked(const protocol::BackwardEvent& e, TraceAggregator::Batch& agg,
                                  BatchOutcome* out) {
  const int32_t id = AggIdLocked(e.layer_id);
  if (id < 0) {
    RejectLocked(e.layer_id, out);
    return;
  }
  const BackwardSample& s = e.sample;
  LayerHistory& history = history_[static_cast<size_t>(id)];
  const bool history_was_empty = history.points().empty();
  const uint64_t thinnings = history.thinnings();
  history.RecordBackward(e.step, s.grad_norm, s.grad_has_nan, changes_);
  TouchLayerLocked(id, history_was_empty, thinnings);
  if (absl::Status st = agg.AddBackward(id, s); !st.ok()) {
    RejectLocked(e.layer_id, out);
    return;
  }
  ++out->accepted;
}

absl::StatusOr<BatchOutcome> Session::AddBatchBytes(std::string_view batch) {
  // The batch's own fields first (cheap: the events are not decoded), then one pass over the
  // events; malformed events stop it (the events before them stay applied and counted).
  absl::StatusOr<protocol::wire::EventBatchSummary> summary = protocol::wire::SkimEventBatch(batch);
  if (!summary.ok()) return summary.status();
  // The op graph (ops="on_nan"), read outside the lock; one that does not read is dropped.
  std::shared_ptr<const OpGraph> op_graph;
  if (!summary->op_graph_json.empty()) {
    if (absl::StatusOr<OpGraph> g = ParseOpGraphJson(summary->op_graph_json); g.ok()) {
      op_graph = std::make_shared<const OpGraph>(*std::move(g));
    }
  }
  BatchOutcome out;
  const absl::Time arrived = absl::Now();
  absl::MutexLock lock(&mu_);
  if (op_graph != nullptr && op_graph_ == nullptr) op_graph_ = std::move(op_graph);
  ++changes_;
  client_dropped_ = std::max(client_dropped_, summary->dropped_events);
  last_sequence_ = std::max(last_sequence_, summary->sequence);
  uint64_t skip = 0;
  if (summary->first_event.has_value()) {
    const uint64_t position = PositionLocked();
    if (*summary->first_event < position) {
      skip = position - *summary->first_event;  // Re-sent: held already.
    } else {
      lost_events_ += *summary->first_event - position;  // Written, never arrived, not re-sent.
    }
  }
  if (last_forward_bytes_.size() < history_.size()) last_forward_bytes_.resize(history_.size());
  absl::Status decoded;
  {
    TraceAggregator::Batch agg(&aggregator_);
    ApplyPass apply(this, &agg, &out, skip);
    decoded = protocol::wire::DecodeEventBatch(batch, &apply).status();
    if (latest_forward_.size() < history_.size()) latest_forward_.resize(history_.size());
    for (const int32_t id : touched_layers_) {
      std::string_view& last = last_forward_bytes_[static_cast<size_t>(id)];
      std::optional<std::string>& kept = latest_forward_[static_cast<size_t>(id)];
      if (last.size() <= kMaxDeferredForwardBytes) {
        if (!kept.has_value()) kept.emplace();
        kept->assign(last);  // Decoded when a record is made (AggregatedLocked).
      } else if (absl::StatusOr<TraceAggregator::Batch::LatestTensors> latest =
                     agg.MutableLatestTensors(id);
                 latest.ok()) {  // Always: `id` is declared.
        kept.reset();
        DecodeLatestTensors(last, latest->inputs, latest->outputs);
      }
      last = std::string_view();
    }
    touched_layers_.clear();
  }
  if (summary->nan_origin.has_value()) {
    TraceMetadata m = aggregator_.metadata();
    const NanOrigin& got = *summary->nan_origin;
    if (!m.nan_origin) {
      m.nan_origin = got;
      aggregator_.SetMetadata(std::move(m));
      nan_found_ = arrived;
    } else if (m.nan_origin->op.empty() && !got.op.empty() && m.nan_origin->layer == got.layer &&
               m.nan_origin->step == got.step) {
      m.nan_origin = got;  // The same origin, now with its op (sent after the step's forward).
      aggregator_.SetMetadata(std::move(m));
    }
  }
  if (out.accepted > 0) newest_event_ = arrived;
  events_ += out.accepted;
  rejected_events_ += out.rejected;
  received_this_run_ += out.accepted + out.rejected;
  if (!decoded.ok()) return decoded;
  return out;
}

void Session::Heartbeat(const protocol::Heartbeat& heartbeat) {
  absl::MutexLock lock(&mu_);
  if (heartbeat.dropped_events > client_dropped_) {
    client_dropped_ = heartbeat.dropped_events;
    ++changes_;
  }
}

void Session::Finish(const protocol::End& end, absl::Time now) {
  absl::MutexLock lock(&mu_);
  ++changes_;
  client_dropped_ = std::max(client_dropped_, end.dropped_events);
  if (end.total_time_ms.has_value()) {
    TraceMetadata m = aggregator_.metadata();
    m.total_time_ms = *end.total_time_ms;
    aggregator_.SetMetadata(std::move(m));
  }
  if (end.hook_errors > 0) {
    TraceMetadata m = aggregator_.metadata();
    m.SetExtra("hook_errors", absl::StrCat(end.hook_errors));
    aggregator_.SetMetadata(std::move(m));
  }
  state_ = SessionState::kFinished;
  ended_ = now;
}

void Session::Abort(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (state_ != SessionState::kLive) return;
  ++changes_;
  state_ = SessionState::kAborted;
  ended_ = now;
}

void Session::Resume(const protocol::Hello& hello, PeerCredentials peer) {
  absl::MutexLock lock(&mu_);
  ++changes_;
  state_ = SessionState::kLive;
  ended_ = absl::InfinitePast();
  peer_ = peer;
  client_dropped_ = std::max(client_dropped_, hello.dropped_events);
  AccountHelloLocked(hello);
}

void Session::AccountHelloLocked(const protocol::Hello& hello) {
  // An agent that re-sends will write again everything from replay_first_event on; the rest of
  // what it sent and we do not hold is lost in transit.
  const uint64_t resent_from = hello.replay_first_event.value_or(hello.sent_events);
  const uint64_t position = PositionLocked();
  if (resent_from > position) lost_events_ += resent_from - position;
}

uint64_t Session::PositionLocked() const { return events_ + rejected_events_ + lost_events_; }

Session::Durable Session::durable() const {
  absl::MutexLock lock(&mu_);
  return durable_;
}

SessionState Session::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

int32_t Session::peer_uid() const {
  absl::MutexLock lock(&mu_);
  return peer_.uid;
}

bool Session::has_events() const {
  absl::MutexLock lock(&mu_);
  return events_ > 0 || rejected_events_ > 0 || DroppedLocked() > 0;
}

uint64_t Session::DroppedLocked() const { return client_dropped_ + lost_events_; }

void Session::SetFlight(const FlightStatus& flight) {
  absl::MutexLock lock(&mu_);
  if (flight == flight_) return;
  flight_ = flight;
  ++changes_;
}

FlightStatus Session::flight() const {
  absl::MutexLock lock(&mu_);
  return flight_;
}

std::optional<Session::NanFound> Session::nan_found() const {
  absl::MutexLock lock(&mu_);
  std::optional<NanOrigin> origin = aggregator_.metadata().nan_origin;
  if (!origin.has_value()) return std::nullopt;
  return NanFound{*std::move(origin), nan_found_};
}

protocol::SessionInfo Session::Info() const {
  absl::MutexLock lock(&mu_);
  return InfoLocked();
}

protocol::SessionInfo Session::InfoLocked() const {
  protocol::SessionInfo info;
  info.session_id = id_;
  info.state = state_;
  info.identity = identity_;
  info.started = started_;
  info.ended = state_ == SessionState::kLive ? absl::InfinitePast() : ended_;
  info.events = events_;
  info.dropped_events = DroppedLocked();
  info.rejected_events = rejected_events_;
  info.peer_uid = peer_.uid;
  info.peer_gid = peer_.gid;
  info.peer_pid = peer_.pid;
  info.flight = flight_;
  if (nan_found_ != absl::InfinitePast()) {
    info.nan_found = nan_found_;
    info.nan_origin = aggregator_.metadata().nan_origin;
  }
  return info;
}

protocol::SessionIndexEntry Session::IndexEntry() const {
  absl::MutexLock lock(&mu_);
  return IndexEntryLocked();
}

protocol::SessionIndexEntry Session::IndexEntryLocked() const {
  return protocol::SessionIndexEntry{.info = InfoLocked(),
                                     .client_dropped_events = client_dropped_,
                                     .lost_events = lost_events_,
                                     .last_sequence = last_sequence_};
}

TraceRecord Session::AggregatedLocked() const {
  // Read under mu_, which the caller holds: the callback runs within this call (the analysis does
  // not follow the lock into the lambda, so it reads through a pointer taken here).
  const std::vector<std::optional<std::string>>* latest = &latest_forward_;
  return aggregator_.SnapshotWith([latest](TraceAggregator::LayerId id, LayerTrace* layer) {
    if (static_cast<size_t>(id) >= latest->size()) return;
    const std::optional<std::string>& kept = (*latest)[static_cast<size_t>(id)];
    if (kept.has_value()) DecodeLatestTensors(*kept, &layer->inputs, &layer->outputs);
  });
}

TraceRecord Session::RecordLocked() const { return RecordFromLocked(AggregatedLocked()); }

TraceRecord Session::RecordFromLocked(TraceRecord r) const {
  r.op_graph = op_graph_;
  int64_t passes = forward_passes_;
  if (restored_.has_value()) {
    r = MergeRecords(restored_->record, r);
    // Steps continue across a restart; a resumed session with no new event keeps its count.
    if (restored_->record.metadata.FindExtra(kForwardPassesKey) != nullptr) {
      passes = std::max(passes, ForwardPasses(restored_->record));
    }
  }
  SetForwardPasses(passes, &r);
  r.metadata.SetExtra("dropped_events", absl::StrCat(DroppedLocked()));
  std::string id_json;
  AppendJsonString(id_, &id_json);
  r.metadata.SetExtra("session_id", std::move(id_json));
  absl::StatusOr<std::vector<Anomaly>> anomalies = DetectAnomalies(r, thresholds_);
  if (anomalies.ok()) r.warnings = *std::move(anomalies);
  return r;
}

TraceRecord Session::Record() const {
  absl::MutexLock lock(&mu_);
  return RecordLocked();
}

protocol::Snapshot Session::ToSnapshot() const {
  protocol::Snapshot snap;
  absl::MutexLock lock(&mu_);
  SnapshotLocked(&snap, nullptr);
  return snap;
}

uint64_t Session::version() const {
  absl::MutexLock lock(&mu_);
  return changes_;
}

absl::Time Session::newest_event() const {
  absl::MutexLock lock(&mu_);
  return newest_event_;
}

Session::WatchView Session::GetWatchView() const {
  WatchView view;
  absl::MutexLock lock(&mu_);
  view.version = changes_;
  view.newest_event = newest_event_;
  view.state = state_;
  SnapshotLocked(&view.snapshot, &view);
  return view;
}

void Session::SnapshotLocked(protocol::Snapshot* snap, WatchView* view) const {
  snap->session = InfoLocked();
  TraceRecord aggregated = AggregatedLocked();
  std::vector<std::string> history_order;  // The aggregator's layer order.
  history_order.reserve(aggregated.layers.size());
  for (const LayerTrace& l : aggregated.layers) history_order.push_back(l.full_name);
  snap->record = RecordFromLocked(std::move(aggregated));
  // History by full_name, in the aggregator's layer order where the layer has points.
  absl::flat_hash_map<std::string_view, size_t> agg_by_name;
  for (size_t wire = 0; wire < agg_ids_.size(); ++wire) {
    if (agg_ids_[wire] >= 0) agg_by_name[wire_names_[wire]] = static_cast<size_t>(agg_ids_[wire]);
  }
  if (view != nullptr) {
    absl::flat_hash_map<std::string_view, bool> restored_names;
    if (restored_.has_value()) {
      for (const LayerTrace& l : restored_->record.layers) restored_names[l.full_name] = true;
    }
    for (const LayerTrace& l : snap->record.layers) {
      auto it = agg_by_name.find(l.full_name);
      const bool known = it != agg_by_name.end() && it->second < layer_changed_.size();
      view->layer_changed.push_back(known ? layer_changed_[it->second] : 0);
      view->layer_born.push_back(
          known && !restored_names.contains(l.full_name) ? layer_born_[it->second] : 0);
    }
  }
  for (const std::string& name : history_order) {
    auto it = agg_by_name.find(name);
    if (it == agg_by_name.end() || it->second >= history_.size()) continue;
    const std::vector<HistoryPoint>& points = history_[it->second].points();
    if (points.empty()) continue;
    LayerSteps& h = snap->history.layers.emplace_back();
    h.full_name = name;
    const size_t n = points.size();
    h.steps.reserve(n);
    h.latency_ms.reserve(n);
    h.output_std.reserve(n);
    h.grad_norm.reserve(n);
    h.non_finite.reserve(n);
    for (const HistoryPoint& p : points) {
      h.steps.push_back(p.step);
      h.latency_ms.push_back(p.latency_ms);
      h.output_std.push_back(p.output_std);
      h.grad_norm.push_back(p.grad_norm);
      h.non_finite.push_back(p.non_finite);
    }
    if (view != nullptr) {
      view->history_changed.push_back(layer_changed_[it->second]);
      view->history_born.push_back(history_born_[it->second]);
      view->history_thinned.push_back(history_thinned_[it->second]);
      view->history_thinned_before.push_back(history_thinned_before_[it->second]);
      view->history_thin_boundary.push_back(history_[it->second].thin_boundary());
      std::vector<uint64_t>& stamps = view->history_point_changed.emplace_back();
      stamps.reserve(points.size());
      for (const HistoryPoint& p : points) stamps.push_back(p.stamp);
    }
  }
}

absl::StatusOr<bool> Session::WriteSnapshot(const std::string& path, bool force) {
  absl::MutexLock write_lock(&write_mu_);
  TraceRecord record;
  uint64_t changes;
  Durable durable;
  {
    absl::MutexLock lock(&mu_);
    changes = changes_;
    durable = {last_sequence_, PositionLocked()};
    if (!force && changes == written_changes_) return false;
    record = RecordLocked();
    absl::StatusOr<std::string> accounting = protocol::IndexEntryToJson(IndexEntryLocked());
    if (!accounting.ok()) return accounting.status();
    record.metadata.SetExtra(kSnapshotAccountingKey, *std::move(accounting));
  }
  CrashPoint("snapshot");
  if (absl::Status s = WriteFileAtomic(path, TraceToJson(record), kDataFileMode); !s.ok()) return s;
  written_changes_ = changes;
  bool moved;
  {
    absl::MutexLock lock(&mu_);
    moved = !(durable_ == durable);
    durable_ = durable;
  }
  if (moved) {
    absl::MutexLock lock(&listeners_mu_);
    for (const auto& [id, listener] : listeners_) listener();
  }
  return true;
}

uint64_t Session::AddDurableListener(std::function<void()> listener) {
  absl::MutexLock lock(&listeners_mu_);
  listeners_.emplace_back(next_listener_, std::move(listener));
  return next_listener_++;
}

void Session::RemoveDurableListener(uint64_t id) {
  absl::MutexLock lock(&listeners_mu_);
  std::erase_if(listeners_, [id](const auto& l) { return l.first == id; });
}

size_t SessionMemoryBound(size_t layers, size_t history_steps) {
  // Per layer: its history (a vector that grows by doubling: at most twice the points), the
  // aggregator's state and the record's layer (fixed fields, names), the latest tensors at their
  // caps, the latest forward event kept encoded (kMaxDeferredForwardBytes), and the session's
  // per-layer tables (ids, names, versions). Per session: identity,
  // metadata, tables' slack. The fixed figures are sizeof()s rounded up, plus allocator overhead;
  // session_memory_test.cc checks the total against heap use.
  constexpr size_t kPerTensor = sizeof(TensorInfo) + kMaxTensorDims * sizeof(int64_t) + 64;
  constexpr size_t kPerLayerFixed = 2 * sizeof(LayerTrace) + 3 * 2 * kMaxLayerNameBytes / 8 + 512;
  const size_t per_layer = 2 * history_steps * sizeof(HistoryPoint) + kPerLayerFixed +
                           2 * kMaxLatestTensors * kPerTensor + kMaxDeferredForwardBytes +
                           sizeof(std::optional<std::string>) + 64;
  constexpr size_t kPerSession = 64 << 10;
  return kPerSession + layers * per_layer;
}

std::optional<protocol::SessionIndexEntry> TakeSnapshotAccounting(TraceRecord* record) {
  std::vector<std::pair<std::string, std::string>>& extra = record->metadata.extra;
  auto it = std::find_if(extra.begin(), extra.end(),
                         [](const auto& kv) { return kv.first == kSnapshotAccountingKey; });
  if (it == extra.end()) return std::nullopt;
  absl::StatusOr<protocol::SessionIndexEntry> entry = protocol::IndexEntryFromJson(it->second);
  extra.erase(it);
  if (!entry.ok()) return std::nullopt;
  return *std::move(entry);
}

}  // namespace tracetorch::daemon
