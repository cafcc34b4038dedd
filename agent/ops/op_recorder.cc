#include "agent/ops/op_recorder.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/ops/finite_scan.h"
#include "agent/ops/ivalue_tensors.h"
#include "agent/ops/script_hierarchy.h"
#include "agent/stats.h"
#include "trace/json_writer.h"

namespace tracetorch::ops {
namespace {

thread_local OpRecorder* t_recorder = nullptr;

// OpContext::op of a callback that is no op and whose internals are ops (see OnStart).
constexpr int32_t kTransparent = -2;

// The index of the op a recorded callback started (-1: left out, its internals too).
struct OpContext : at::ObserverContext {
  explicit OpContext(int32_t op) : op(op) {}
  int32_t op;
};

std::unique_ptr<at::ObserverContext> StartTrampoline(const at::RecordFunction& fn) {
  OpRecorder* r = t_recorder;
  return r == nullptr ? nullptr : r->OnStart(fn);
}

void EndTrampoline(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  OpRecorder* r = t_recorder;
  if (r != nullptr) r->OnEnd(fn, ctx);
}

bool IsSkipped(std::string_view name) {
  for (std::string_view s : kSkippedOps) {
    if (s == name) return true;
  }
  return false;
}

absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string_view StripNamespace(std::string_view name) {
  const size_t colons = name.rfind("::");
  return colons == std::string_view::npos ? name : name.substr(colons + 2);
}

TensorInfo Describe(const at::Tensor& tensor) {
  // A nested tensor (nn.TransformerEncoder's fast path) by its padded form (agent/stats.h).
  const at::Tensor t = agent::DenseView(tensor);
  TensorInfo info;
  const auto sizes = t.sizes();
  info.shape.assign(sizes.begin(), sizes.end());
  info.dtype = std::string(agent::DtypeName(t.scalar_type()));
  info.device = t.device().is_cpu() ? std::string("cpu") : t.device().str();
  return info;
}

// A non-tensor argument as JSON text.
void AppendArgJson(const c10::IValue& v, std::string* out, int depth = 0) {
  if (v.isNone()) {
    out->append("null");
  } else if (v.isBool()) {
    out->append(v.toBool() ? "true" : "false");
  } else if (v.isInt()) {
    absl::StrAppend(out, v.toInt());
  } else if (v.isDouble()) {
    AppendJsonDouble(v.toDouble(), out);
  } else if (v.isString()) {
    AppendJsonString(v.toStringRef(), out);
  } else if (v.isDevice()) {
    AppendJsonString(v.toDevice().str(), out);
  } else if ((v.isList() || v.isTuple()) && depth < 8) {
    out->push_back('[');
    bool first = true;
    auto each = [&](const c10::IValue& e) {
      if (!first) out->append(", ");
      first = false;
      AppendArgJson(e, out, depth + 1);
    };
    if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) each(e);
    } else {
      for (const c10::IValue& e : v.toTupleRef().elements()) each(e);
    }
    out->push_back(']');
  } else {
    AppendJsonString(absl::StrCat("<", v.tagKind(), ">"), out);
  }
}

bool HoldsTensor(const c10::IValue& v) {
  if (v.isTensor()) return true;
  if (v.isTensorList()) return true;
  if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor()) return true;
    }
  }
  return false;
}

bool IsFinitePreserving(std::string_view func) {
  for (std::string_view s : kFinitePreservingOps) {
    if (s == func) return true;
  }
  return false;
}

bool IsAll(const OpSelector& s) { return s.ToString() == "all"; }
bool IsNone(const OpSelector& s) { return s.ToString() == "none"; }

bool AnyNeedsModuleOutputs(const std::vector<OpSelector>& sites) {
  for (const OpSelector& s : sites) {
    if (s.NeedsModuleOutputs()) return true;
  }
  return false;
}

}  // namespace

OpRecorder::OpRecorder(OpRecorderOptions options)
    : options_(std::move(options)),
      save_all_(IsAll(options_.save)),
      save_none_(IsNone(options_.save)),
      save_at_pop_(options_.save.NeedsModuleOutputs()),
      intervene_at_pop_(AnyNeedsModuleOutputs(options_.intervene_sites)) {}

OpRecorder::~OpRecorder() { Stop(); }

void OpRecorder::Measure(const at::Tensor& tensor, TensorInfo* info) const {
  const at::Tensor t = agent::DenseView(tensor);
  if (options_.nonfinite_only) {
    info->nonfinite = CountNonFinite(t);
    return;
  }
  absl::StatusOr<TensorStats> stats = agent::ComputeTensorStats(t, agent::StatsMode::kFull);
  if (stats.ok()) info->stats = *stats;
}

bool OpRecorder::FiniteByInputs(const OpNode& node) const {
  if (node.inputs.empty() || !IsFinitePreserving(node.func_name)) return false;
  for (const OpInput& in : node.inputs) {
    const OpSource& s = in.source;
    const TensorInfo* known = nullptr;
    if (s.kind == OpSource::Kind::kOp && static_cast<size_t>(s.index) < graph_.ops.size() &&
        static_cast<size_t>(s.output) < graph_.ops[s.index].outputs.size()) {
      known = &graph_.ops[s.index].outputs[s.output];
    } else if (s.kind == OpSource::Kind::kInput &&
               static_cast<size_t>(s.index) < graph_.inputs.size()) {
      known = &graph_.inputs[s.index].tensor;
    }
    if (known == nullptr || (!known->nonfinite && !known->stats) || NanCount(*known) > 0 ||
        InfCount(*known) > 0) {
      return false;
    }
  }
  return true;
}

void OpRecorder::AddInput(std::string name, const at::Tensor& tensor) {
  if (!tensor.defined()) return;
  const int32_t index = static_cast<int32_t>(graph_.inputs.size());
  TensorInfo info = Describe(tensor);
  if (options_.stats) {
    at::DisableRecordFunctionGuard quiet;
    Measure(tensor, &info);
  }
  graph_.inputs.push_back(OpGraphInput{std::move(name), std::move(info)});
  Record(tensor.unsafeGetTensorImpl(), tensor, OpSource{OpSource::Kind::kInput, index, 0});
}

void OpRecorder::AddParameter(std::string name, const at::Tensor& tensor, bool buffer) {
  if (!tensor.defined()) return;
  pending_params_.emplace(
      tensor.unsafeGetTensorImpl(),
      Pending{std::move(name), c10::weak_intrusive_ptr<c10::TensorImpl>(tensor.getIntrusivePtr()),
              buffer});
}

absl::Status OpRecorder::Start() {
  if (active_) return absl::FailedPreconditionError("the op recorder is already recording");
  if (t_recorder != nullptr) {
    return absl::FailedPreconditionError("another op capture is active on this thread");
  }
  try {
    at::RecordFunctionCallback cb(&StartTrampoline, &EndTrampoline);
    cb.needsInputs(true).needsOutputs(true).scopes({at::RecordScope::FUNCTION});
    handle_ = at::addThreadLocalCallback(cb);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot install the operator callback: ", e.what()));
  }
  t_recorder = this;
  active_ = true;
  depth_ = 0;
  return absl::OkStatus();
}

void OpRecorder::Stop() {
  if (!active_) return;
  try {
    at::removeCallback(handle_);
  } catch (const std::exception& e) {
    Fail("remove_callback", e.what());
  }
  handle_ = at::INVALID_CALLBACK_HANDLE;
  if (t_recorder == this) t_recorder = nullptr;
  active_ = false;
  while (!open_.empty()) PopModule(open_.back().pass, {});
  LinkChildren(graph_);
  FindNanOrigin();
  // The weak references only served to keep addresses unique while recording.
  producers_.clear();
  by_data_.clear();
  pending_params_.clear();
  last_outputs_.clear();
}

void OpRecorder::FindNanOrigin() {
  trouble_ = FindOpTrouble(graph_);
  graph_.nan_origin = trouble_.origin;
}

void OpRecorder::Fail(std::string_view cause, std::string_view message) {
  if (first_error_.empty()) {
    first_error_ = absl::StrCat(absl::string_view(cause.data(), cause.size()), ": ",
                                absl::string_view(message.data(), message.size()));
  }
  errors_.Record(cause, message);
}

void OpRecorder::Record(const c10::TensorImpl* impl, const at::Tensor& t, OpSource source) {
  producers_.insert_or_assign(
      impl, Producer{c10::weak_intrusive_ptr<c10::TensorImpl>(t.getIntrusivePtr()), source});
  // Only a saved output can be shallow-copied (see Canonical): without saving, nothing to index.
  if (!save_none_ && source.kind == OpSource::Kind::kOp && HasData(t)) {
    by_data_[t.data_ptr()] = impl;
  }
}

bool OpRecorder::HasData(const at::Tensor& t) {
  return t.layout() == c10::kStrided && !t.is_nested() && t.has_storage() && t.numel() > 0;
}

const c10::TensorImpl* OpRecorder::Canonical(const at::Tensor& t) const {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (by_data_.empty() || producers_.contains(impl) || !HasData(t)) return impl;
  auto it = by_data_.find(t.data_ptr());
  if (it == by_data_.end()) return impl;
  auto p = producers_.find(it->second);
  if (p == producers_.end()) return impl;
  const c10::intrusive_ptr<c10::TensorImpl> known = p->second.impl.lock();
  // The same elements: storage, offset, sizes, strides and dtype.
  if (!known || known->storage().data() != t.storage().data() ||
      known->storage_offset() != t.storage_offset() || known->sizes() != t.sizes() ||
      known->strides() != t.strides() || known->dtype() != t.dtype()) {
    return impl;
  }
  return it->second;
}

OpSource OpRecorder::Resolve(const at::Tensor& t) {
  const c10::TensorImpl* impl = Canonical(t);
  if (auto it = producers_.find(impl); it != producers_.end() && !it->second.impl.expired()) {
    return it->second.source;
  }
  if (auto it = pending_params_.find(impl); it != pending_params_.end()) {
    const int32_t index = static_cast<int32_t>(graph_.params.size());
    graph_.params.push_back(
        OpGraphParam{std::move(it->second.name), Describe(t), it->second.buffer});
    pending_params_.erase(it);
    const OpSource source{OpSource::Kind::kParameter, index, 0};
    Record(impl, t, source);
    return source;
  }
  return OpSource{};
}

OpSource OpRecorder::SourceOf(const at::Tensor& tensor) const {
  if (!tensor.defined()) return OpSource{};
  auto it = producers_.find(Canonical(tensor));
  if (it == producers_.end() || it->second.impl.expired()) return OpSource{};
  return it->second.source;
}

const OpRecorder::SchemaInfo& OpRecorder::SchemaOf(const at::RecordFunction& fn) {
  const c10::optional<c10::OperatorName> op = fn.operator_name();
  std::string key =
      op ? (op->overload_name.empty() ? op->name : absl::StrCat(op->name, ".", op->overload_name))
         : std::string(fn.name());
  auto [it, inserted] = schemas_.try_emplace(std::move(key));
  if (!inserted || !op) return it->second;
  const c10::optional<c10::OperatorHandle> handle = c10::Dispatcher::singleton().findSchema(*op);
  if (!handle || !handle->hasSchema()) return it->second;
  SchemaInfo& info = it->second;
  for (const c10::Argument& arg : handle->schema().arguments()) {
    info.names.push_back(arg.name());
    info.writes.push_back(arg.alias_info() != nullptr && arg.alias_info()->isWrite());
  }
  info.known = true;
  return info;
}

std::unique_ptr<at::ObserverContext> OpRecorder::OnStart(const at::RecordFunction& fn) {
  // A Python autograd Function's apply (torch.utils.checkpoint's CheckpointFunction, a custom
  // Function) is no dispatcher operator: not an op, and the ops it runs are the model's.
  if (depth_ == 0 && !fn.operator_name().has_value()) {
    return std::make_unique<OpContext>(kTransparent);
  }
  if (depth_++ > 0) return nullptr;  // Inside a recorded op: its internals are not ops.
  const std::string_view name = fn.name();
  if (IsSkipped(name)) return std::make_unique<OpContext>(-1);
  at::DisableRecordFunctionGuard quiet;  // What we run here (clones) is not the model's.
  const int32_t op = static_cast<int32_t>(graph_.ops.size());
  try {
    OpNode node;
    const c10::optional<c10::OperatorName> op_name = fn.operator_name();
    node.op_name = op_name && !op_name->overload_name.empty()
                       ? absl::StrCat(op_name->name, ".", op_name->overload_name)
                       : std::string(name);
    node.func_name = std::string(StripNamespace(name));
    node.index = op + 1;
    node.call_index = ++call_counts_[node.func_name];
    node.label = OpLabel(node.func_name, node.call_index, node.index);
    if (options_.script_modules) ScriptTransition();
    node.module_pass = open_.empty() ? -1 : open_.back().pass;
    const SchemaInfo& schema = SchemaOf(fn);
    c10::ArrayRef<const c10::IValue> inputs = fn.inputs();
    // A boxed call (the TorchScript interpreter's) hands the observer its whole stack, whatever
    // lies below the operator's own arguments included (the method's module object): its
    // arguments are the last ones.
    if (schema.known && inputs.size() > schema.names.size()) {
      inputs = inputs.slice(inputs.size() - schema.names.size());
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const bool named = schema.known && i < schema.names.size();
      const c10::IValue& v = inputs[i];
      if (HoldsTensor(v)) {
        const bool writes = named && schema.writes[i];
        ForEachTensor(v, [&](const at::Tensor& t) {
          if (!t.defined()) return;
          if (writes) {
            node.inplace = true;
            CopyOnWrite(t);
          }
          OpInput in{Describe(t), Resolve(t), named ? schema.names[i] : std::string()};
          if (in.source.kind == OpSource::Kind::kParameter) node.params += t.numel();
          if (in.source.kind == OpSource::Kind::kOp) node.parents.push_back(in.source.index);
          node.inputs.push_back(std::move(in));
        });
        continue;
      }
      if (v.isTensor()) continue;  // An undefined optional tensor.
      OpArg arg{named ? schema.names[i] : absl::StrCat("arg", i), std::string()};
      AppendArgJson(v, &arg.value);
      node.args.push_back(std::move(arg));
    }
    std::sort(node.parents.begin(), node.parents.end());
    node.parents.erase(std::unique(node.parents.begin(), node.parents.end()), node.parents.end());
    graph_.ops.push_back(std::move(node));
    saved_.emplace_back();
    intervened_.push_back(false);
    starts_.push_back(Clock::now());
  } catch (const std::exception& e) {
    Fail("op_start", e.what());
    graph_.ops.resize(op);
    saved_.resize(op);
    intervened_.resize(op);
    starts_.resize(op);
    return std::make_unique<OpContext>(-1);
  }
  return std::make_unique<OpContext>(op);
}

void OpRecorder::OnEnd(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (ctx != nullptr && static_cast<OpContext*>(ctx)->op == kTransparent) return;
  --depth_;
  if (ctx == nullptr) return;
  const int32_t op = static_cast<OpContext*>(ctx)->op;
  if (op < 0 || static_cast<size_t>(op) >= graph_.ops.size()) return;
  const Clock::time_point end = Clock::now();
  at::DisableRecordFunctionGuard quiet;
  try {
    OpNode& node = graph_.ops[op];
    node.time_ms = std::chrono::duration<double, std::milli>(end - starts_[op]).count();
    std::vector<at::Tensor> outputs;
    for (const c10::IValue& v : fn.outputs()) {
      ForEachTensor(v, [&](const at::Tensor& t) {
        if (t.defined()) outputs.push_back(t);
      });
    }
    node.tensor_output = !outputs.empty();
    if (options_.script_modules) last_outputs_ = outputs;
    for (size_t k = 0; k < outputs.size(); ++k) {
      Record(outputs[k].unsafeGetTensorImpl(), outputs[k],
             OpSource{OpSource::Kind::kOp, op, static_cast<int32_t>(k)});
    }
    bool site_built = false;
    OpSite site;
    if (!options_.intervene_sites.empty() && outputs.size() == 1) {
      site = Site(op);
      site_built = true;
      for (size_t s = 0; s < options_.intervene_sites.size(); ++s) {
        if (options_.intervene_sites[s].Matches(site)) {
          intervened_[op] = true;
          Intervene(op, static_cast<int32_t>(s), outputs[0]);
          break;
        }
      }
    }
    const bool implied_finite =
        options_.stats && options_.nonfinite_only && !intervened_[op] && FiniteByInputs(node);
    for (const at::Tensor& t : outputs) {
      TensorInfo info = Describe(t);
      if (implied_finite) {
        info.nonfinite = NonFiniteCounts{};
      } else if (options_.stats) {
        Measure(t, &info);
      }
      graph_.ops[op].outputs.push_back(std::move(info));
    }
    if (!save_none_ && !outputs.empty()) {
      if (!site_built && !save_all_) site = Site(op);
      if (save_all_ || options_.save.Matches(site)) {
        for (size_t k = 0; k < outputs.size(); ++k) Keep(op, static_cast<int32_t>(k), outputs[k]);
      }
    }
  } catch (const std::exception& e) {
    Fail("op_end", e.what());
  }
}

void OpRecorder::Keep(int32_t op, int32_t output, const at::Tensor& t) {
  std::vector<at::Tensor>& slots = saved_[op];
  if (slots.size() <= static_cast<size_t>(output)) slots.resize(output + 1);
  if (slots[output].defined()) return;
  slots[output] = t;
  kept_[t.unsafeGetTensorImpl()].emplace_back(op, output);
  graph_.ops[op].saved = true;
}

void OpRecorder::CopyOnWrite(const at::Tensor& written) {
  auto it = kept_.find(Canonical(written));
  if (it == kept_.end()) return;
  at::Tensor copy;
  {
    c10::NoGradGuard no_grad;
    copy = written.detach().clone();
  }
  for (const auto& [op, output] : it->second) saved_[op][output] = copy;
  kept_.erase(it);  // The copy is ours: no op of the model writes it.
}

void OpRecorder::Intervene(int32_t op, int32_t site, const at::Tensor& output) {
  if (!options_.intervene) return;
  try {
    at::Tensor replacement = options_.intervene(site, output);
    if (!replacement.defined()) return;
    c10::NoGradGuard no_grad;
    const_cast<at::Tensor&>(output).copy_(replacement);
  } catch (const std::exception& e) {
    Fail("intervene", absl::StrCat(graph_.ops[op].label, ": ", e.what()));
  }
}

OpSite OpRecorder::Site(int32_t op) const { return SiteOf(graph_, op); }

int32_t OpRecorder::PushModule(std::string_view path, std::string_view type,
                               const std::vector<at::Tensor>& inputs, int64_t params) {
  at::DisableRecordFunctionGuard quiet;
  ModulePass m;
  m.path = std::string(path);
  m.type = std::string(type);
  m.pass = ++pass_counts_[m.path];
  m.parent = open_.empty() ? -1 : open_.back().pass;
  m.params = params;
  for (const at::Tensor& t : inputs) {
    if (t.defined()) m.inputs.push_back(Resolve(t));
  }
  const int32_t index = static_cast<int32_t>(graph_.modules.size());
  graph_.modules.push_back(std::move(m));
  open_.push_back(OpenPass{index, static_cast<int32_t>(graph_.ops.size())});
  return index;
}

void OpRecorder::PopModule(int32_t pass, const std::vector<at::Tensor>& outputs) {
  auto it = std::find_if(open_.begin(), open_.end(),
                         [pass](const OpenPass& p) { return p.pass == pass; });
  if (it == open_.end()) return;
  at::DisableRecordFunctionGuard quiet;
  // Passes opened inside this one and left open: script passes, or passes whose forward raised.
  while (open_.back().pass != pass) {
    const OpenPass inner = open_.back();
    open_.pop_back();
    ClosePass(inner, inner.script ? last_outputs_ : std::vector<at::Tensor>());
  }
  const OpenPass mine = open_.back();
  open_.pop_back();
  ClosePass(mine, outputs);
}

void OpRecorder::ClosePass(const OpenPass& p, const std::vector<at::Tensor>& outputs) {
  const int32_t n = static_cast<int32_t>(graph_.ops.size());
  const int32_t pass = p.pass;
  if (n > p.first) {
    graph_.modules[pass].first_op = p.first;
    graph_.modules[pass].last_op = n - 1;
  } else if (p.script) {
    return;  // A script pass that ran no op has no output of its own.
  }
  std::vector<std::pair<int32_t, const at::Tensor*>> producers;
  for (const at::Tensor& t : outputs) {
    if (!t.defined()) continue;
    const OpSource source = Resolve(t);
    graph_.modules[pass].outputs.push_back(source);
    if (source.kind != OpSource::Kind::kOp) continue;
    std::vector<int32_t>& of = graph_.ops[source.index].output_of;
    if (std::find(of.begin(), of.end(), pass) == of.end()) of.push_back(pass);
    producers.emplace_back(source.index, &t);
  }
  if (!save_at_pop_ && !intervene_at_pop_) return;
  try {
    for (const auto& [op, tensor] : producers) {
      const OpSite site = Site(op);
      if (intervene_at_pop_ && !intervened_[op]) {
        for (size_t s = 0; s < options_.intervene_sites.size(); ++s) {
          if (options_.intervene_sites[s].Matches(site)) {
            intervened_[op] = true;
            Intervene(op, static_cast<int32_t>(s), *tensor);
            break;
          }
        }
      }
      if (save_at_pop_ && options_.save.Matches(site)) {
        Keep(op, SourceOf(*tensor).output, *tensor);
      }
    }
  } catch (const std::exception& e) {
    Fail("module_end", e.what());
  }
}

void OpRecorder::ScriptTransition() {
  const std::vector<std::string> hierarchy = CurrentModuleHierarchy();
  const std::vector<ScriptFrame> frames = ParseModuleHierarchy(hierarchy);
  size_t base = open_.size();  // The first script pass on the stack.
  while (base > 0 && open_[base - 1].script) --base;
  // Keep the script passes that are a prefix of the current path.
  size_t keep = 0;
  std::string path;
  std::vector<std::string> paths;
  for (const ScriptFrame& f : frames) {
    path = path.empty() ? std::string(f.instance) : absl::StrCat(path, ".", A(f.instance));
    paths.push_back(path);
  }
  while (base + keep < open_.size() && keep < paths.size() &&
         graph_.modules[open_[base + keep].pass].path == paths[keep]) {
    ++keep;
  }
  while (open_.size() > base + keep) {
    const OpenPass inner = open_.back();
    open_.pop_back();
    ClosePass(inner, last_outputs_);
  }
  for (size_t k = keep; k < frames.size(); ++k) {
    PushModule(paths[k], frames[k].type, {}, 0);
    open_.back().script = true;
  }
}

void OpRecorder::SetOutputs(const std::vector<at::Tensor>& outputs) {
  graph_.outputs.clear();
  for (const at::Tensor& t : outputs) {
    if (t.defined()) graph_.outputs.push_back(SourceOf(t));
  }
}

const std::vector<at::Tensor>& OpRecorder::saved(int32_t op) const {
  static const std::vector<at::Tensor> kNone;
  if (op < 0 || static_cast<size_t>(op) >= saved_.size()) return kNone;
  return saved_[op];
}

}  // namespace tracetorch::ops
