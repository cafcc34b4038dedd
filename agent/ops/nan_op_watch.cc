#include "agent/ops/nan_op_watch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "trace/op_graph_json.h"

namespace tracetorch::ops {
namespace {

bool NonFinite(const TensorInfo& t) { return NanCount(t) > 0 || InfCount(t) > 0; }

// Whether a NaN/Inf appeared anywhere in the step: an op's output or a graph input.
bool AnyNonFinite(const OpGraph& g) {
  for (const OpGraphInput& in : g.inputs) {
    if (NonFinite(in.tensor)) return true;
  }
  for (const OpNode& op : g.ops) {
    for (const TensorInfo& t : op.outputs) {
      if (NonFinite(t)) return true;
    }
  }
  return false;
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
  if (outputs == nullptr || !AnyNonFinite(recorder->graph())) return;
  kept_ = std::move(recorder->mutable_graph());
  kept_json_ = OpGraphToJson(*kept_, 0);
}

void NanOpWatch::Reset() {
  AbortStep();
  params_.clear();
  kept_.reset();
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
  if (!kept_->nan_origin) return k;
  const OpNode& op = kept_->ops[static_cast<size_t>(*kept_->nan_origin)];
  k.has_op = true;
  k.op = op.label;
  k.op_func = op.func_name;
  k.op_module = kept_->ModuleAddress(op.module_pass);
  return k;
}

bool NanOpWatch::Annotate(NanOrigin* origin) const { return kept_origin().Annotate(origin); }

}  // namespace tracetorch::ops
