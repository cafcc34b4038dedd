#include "agent/ops/nan_op_watch.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "trace/nonfinite.h"
#include "trace/op_graph_json.h"

namespace tracetorch::ops {
namespace {

bool NonFinite(const TensorInfo& t) { return NanCount(t) > 0 || InfCount(t) > 0; }

bool AnyNonFinite(const std::vector<TensorInfo>& tensors) {
  for (const TensorInfo& t : tensors) {
    if (NonFinite(t)) return true;
  }
  return false;
}

// The first op, in execution order, inside a pass of the module at `path` whose output held a
// non-finite value (the forward's absorbed value whose backward made the NaN); nullopt if none.
std::optional<int32_t> FirstNonFiniteOpIn(const OpGraph& g, std::string_view path) {
  std::optional<int32_t> found;
  for (const ModulePass& m : g.modules) {
    if (m.path != path || m.first_op < 0) continue;
    for (int32_t i = m.first_op; i <= m.last_op && static_cast<size_t>(i) < g.ops.size(); ++i) {
      if (found && i >= *found) break;
      if (AnyNonFinite(g.ops[static_cast<size_t>(i)].outputs)) {
        found = i;
        break;
      }
    }
  }
  return found;
}

OpRecorderOptions WatchOptions() {
  OpRecorderOptions o;
  o.save = OpSelector::None();
  o.stats = true;
  o.nonfinite_only = true;
  return o;
}

}  // namespace

NanOpWatch::NanOpWatch(std::string model_name, std::string root_type, std::string source)
    : model_name_(std::move(model_name)),
      root_type_(std::move(root_type)),
      source_(std::move(source)) {}

NanOpWatch::~NanOpWatch() { AbortStep(); }

void NanOpWatch::AddParameter(std::string name, const at::Tensor& tensor, bool buffer) {
  if (!tensor.defined()) return;
  params_.push_back(Param{std::move(name), tensor, buffer});
}

void NanOpWatch::BeginStep(int64_t step, const std::vector<at::Tensor>& inputs) {
  if (kept_ || recorder_ != nullptr) return;
  const std::thread::id self = std::this_thread::get_id();
  if (!thread_) thread_ = self;
  if (*thread_ != self) return;
  auto recorder = std::make_unique<OpRecorder>(WatchOptions());
  OpGraph& g = recorder->mutable_graph();
  g.model_name = model_name_;
  g.source = source_;
  g.step = step;
  for (size_t i = 0; i < inputs.size(); ++i) {
    recorder->AddInput(i == 0 ? std::string("input") : absl::StrCat("input.", i), inputs[i]);
  }
  for (const Param& p : params_) recorder->AddParameter(p.name, p.tensor, p.buffer);
  if (absl::Status s = recorder->Start(); !s.ok()) {
    ++skipped_steps_;  // Another recorder on this thread (tl.trace inside the session).
    return;
  }
  recorder_ = std::move(recorder);
  step_ = step;
  root_pass_ = recorder_->PushModule("", root_type_, inputs, 0);
}

int32_t NanOpWatch::PushModule(std::string_view path, std::string_view type,
                               const std::vector<at::Tensor>& inputs, int64_t params) {
  if (recorder_ == nullptr || std::this_thread::get_id() != *thread_) return -1;
  return recorder_->PushModule(path, type, inputs, params);
}

void NanOpWatch::PopModule(int32_t pass, const std::vector<at::Tensor>& outputs) {
  if (pass < 0 || recorder_ == nullptr || std::this_thread::get_id() != *thread_) return;
  recorder_->PopModule(pass, outputs);
}

std::unique_ptr<at::ObserverContext> NanOpWatch::StartOp(const at::RecordFunction& fn) {
  if (recorder_ == nullptr || std::this_thread::get_id() != *thread_) return nullptr;
  return recorder_->OnStart(fn);
}

void NanOpWatch::EndOp(const at::RecordFunction& fn, std::unique_ptr<at::ObserverContext> ctx) {
  if (ctx == nullptr || recorder_ == nullptr || std::this_thread::get_id() != *thread_) return;
  recorder_->OnEnd(fn, ctx.get());
}

void NanOpWatch::EndStep(const std::vector<at::Tensor>& outputs) { Finish(&outputs); }

void NanOpWatch::AbortStep() { Finish(nullptr); }

void NanOpWatch::Finish(const std::vector<at::Tensor>* outputs) {
  if (recorder_ == nullptr || std::this_thread::get_id() != *thread_) return;
  std::unique_ptr<OpRecorder> recorder = std::move(recorder_);
  if (outputs != nullptr) {
    recorder->PopModule(root_pass_, *outputs);
    recorder->SetOutputs(*outputs);
  }
  recorder->Stop();
  ++recorded_steps_;
  if (recorder->hook_errors() > 0) {
    hook_errors_ += recorder->hook_errors();
    if (first_error_.empty()) first_error_ = recorder->first_error();
  }
  previous_.reset();
  if (outputs == nullptr) return;
  const OpTrouble& trouble = recorder->trouble();
  if (trouble.matters()) {
    Keep(std::move(recorder->mutable_graph()), /*backward=*/false);
  } else if (trouble.nonfinite_ops > 0) {
    // Absorbed in the forward; held in case the backward of this step makes a NaN of it.
    previous_ = std::move(recorder->mutable_graph());
  }
}

void NanOpWatch::Keep(OpGraph graph, bool backward) {
  kept_ = std::make_shared<const OpGraph>(std::move(graph));
  kept_backward_ = backward;
  kept_json_ = OpGraphToJson(*kept_, 0);
  previous_.reset();
}

void NanOpWatch::NoteLayerOrigin(const std::optional<NanOrigin>& origin) {
  if (kept_ || !origin || !origin->backward || !previous_ || !previous_->step ||
      *previous_->step != origin->step) {
    return;
  }
  previous_->nan_origin = FirstNonFiniteOpIn(*previous_, origin->layer);
  kept_is_nan_ = origin->is_nan;
  kept_layer_ = origin->layer;
  Keep(*std::move(previous_), /*backward=*/true);
}

std::optional<std::optional<NanOrigin>> NanOpWatch::TakeReport(
    const std::optional<NanOrigin>& layer_origin) {
  NoteLayerOrigin(layer_origin);
  if (!kept_ || reported_) return std::nullopt;
  reported_ = true;
  return Resolve(layer_origin);
}

void NanOpWatch::Reset() {
  AbortStep();
  params_.clear();
  kept_.reset();
  kept_backward_ = false;
  reported_ = false;
  kept_is_nan_ = true;
  kept_layer_.clear();
  previous_.reset();
  kept_json_.clear();
  thread_.reset();
  recorded_steps_ = 0;
  skipped_steps_ = 0;
  hook_errors_ = 0;
  first_error_.clear();
}

bool KeptOrigin::Annotate(NanOrigin* origin) const {
  if (!has_op || step < 0 || origin->step != step) return false;
  if (origin->layer == NanOrigin::kModelInput) return false;
  origin->op = op;
  origin->op_func = op_func;
  origin->op_module = op_module;
  return true;
}

KeptOrigin NanOpWatch::kept_origin() const {
  KeptOrigin k;
  if (!kept_ || !kept_->step) return k;
  k.step = *kept_->step;
  k.backward = kept_backward_;
  k.is_nan = kept_is_nan_;
  k.layer = kept_backward_ ? kept_layer_ : std::string(NanOrigin::kModelInput);
  if (!kept_->nan_origin) {
    if (!kept_backward_) {
      k.is_nan = std::any_of(kept_->inputs.begin(), kept_->inputs.end(),
                             [](const OpGraphInput& in) { return NanCount(in.tensor) > 0; });
    }
    return k;
  }
  const OpNode& op = kept_->ops[static_cast<size_t>(*kept_->nan_origin)];
  k.has_op = true;
  k.op = op.label;
  k.op_func = op.func_name;
  k.op_module = kept_->ModuleAddress(op.module_pass);
  const bool in_module =
      op.module_pass > 0 && static_cast<size_t>(op.module_pass) < kept_->modules.size();
  if (kept_backward_) return k;
  k.layer = in_module ? kept_->modules[static_cast<size_t>(op.module_pass)].path
                      : std::string(NanOrigin::kModelCode);
  k.is_nan = AnyNan(op.outputs);
  return k;
}

std::optional<NanOrigin> NanOpWatch::Resolve(const std::optional<NanOrigin>& layer_origin) const {
  const KeptOrigin k = kept_origin();
  if (layer_origin) {
    NanOrigin out = *layer_origin;
    k.Annotate(&out);
    return out;
  }
  if (!kept_ || !kept_->step) return std::nullopt;
  NanOrigin out;
  out.layer = k.layer;
  out.step = k.step;
  out.is_nan = k.is_nan;
  out.backward = k.backward;
  if (k.has_op) {
    out.op = k.op;
    out.op_func = k.op_func;
    out.op_module = k.op_module;
  }
  return out;
}

bool NanOpWatch::Annotate(NanOrigin* origin) const { return kept_origin().Annotate(origin); }

}  // namespace tracetorch::ops
