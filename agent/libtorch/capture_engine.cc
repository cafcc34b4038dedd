#include "agent/libtorch/capture_engine.h"

#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/ops/ivalue_tensors.h"
#include "agent/ops/script_hierarchy.h"
#include "guest/hook_guard.h"

namespace tracetorch::libtorch_internal {
namespace {

using ops::ForEachTensor;

thread_local CaptureEngine* t_engine = nullptr;
// Keeps an engine whose session was destroyed on another thread alive until this thread can
// remove its callback (see Abandon()).
thread_local std::shared_ptr<CaptureEngine> t_engine_ref;
std::atomic<uint64_t> g_next_epoch{1};

constexpr size_t kMaxHierarchyCache = 4096;

// No exception leaves a callback into the traced program: what OnStart/OnEnd throw is counted in
// the session's hook errors and logged once per cause.
std::unique_ptr<at::ObserverContext> StartTrampoline(const at::RecordFunction& fn) {
  CaptureEngine* e = t_engine;
  if (e == nullptr || e->abandoned()) return nullptr;
  guest::GuardHook(e->tracer().errors(), "operator_start", [&] { e->OnStart(fn); });
  return nullptr;
}

void EndTrampoline(const at::RecordFunction& fn, at::ObserverContext* /*ctx*/) {
  CaptureEngine* e = t_engine;
  if (e == nullptr || e->abandoned()) return;
  guest::GuardHook(e->tracer().errors(), "operator_end", [&] { e->OnEnd(fn); });
}

bool StartsWith(const char* s, std::string_view prefix) {
  return s != nullptr && std::strncmp(s, prefix.data(), prefix.size()) == 0;
}

// aten::add_, aten::relu_, ... (not aten::__iand__ and friends, which are rare on tensors).
bool IsInPlaceName(const char* name) {
  if (name == nullptr) return false;
  const size_t n = std::strlen(name);
  return n > 1 && name[n - 1] == '_' && name[n - 2] != '_';
}

}  // namespace

CaptureEngine::CaptureEngine(std::shared_ptr<agent::Session> session, ModuleTree tree, Mode mode,
                             const void* script_self)
    : session_(std::move(session)),
      tracer_(&session_->tracer()),
      mode_(mode),
      script_self_(script_self),
      tree_(std::move(tree)) {}

CaptureEngine::~CaptureEngine() = default;

CaptureEngine* CaptureEngine::Current() { return t_engine; }

absl::Status CaptureEngine::Install() {
  if (installed_) return absl::FailedPreconditionError("the capture is already installed");
  if (t_engine != nullptr) {
    if (!t_engine->abandoned()) {
      return absl::FailedPreconditionError(
          "another tracetorch TraceSession is active on this thread; stop it first");
    }
    at::removeCallback(t_engine->handle_);  // Left by a session destroyed on another thread.
    t_engine = nullptr;
    t_engine_ref.reset();
  }
  marks_.clear();
  op_marks_.clear();
  op_depth_ = 0;
  backward_depth_ = 0;
  script_depth_ = 0;
  script_root_open_ = false;
  root_scoped_ = false;
  first_target_ = -1;
  stack_.clear();
  scopes_.clear();
  hierarchy_cache_.clear();
  in_op_start_ = false;
  hand_over_op_ = false;
  handed_op_.reset();
  watch_ = session_->op_watch();
  try {
    tree_.IndexTensors();
    at::RecordFunctionCallback cb(&StartTrampoline, &EndTrampoline);
    cb.needsInputs(true).needsOutputs(true).scopes({at::RecordScope::FUNCTION,
                                                    at::RecordScope::BACKWARD_FUNCTION,
                                                    at::RecordScope::TORCHSCRIPT_FUNCTION});
    handle_ = at::addThreadLocalCallback(cb);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot install the operator callbacks: ", e.what()));
  }
  epoch_ = g_next_epoch.fetch_add(1, std::memory_order_relaxed);
  t_engine = this;
  t_engine_ref = shared_from_this();
  installed_ = true;
  return absl::OkStatus();
}

void CaptureEngine::Uninstall() {
  if (!installed_ || t_engine != this) return;
  {
    at::DisableRecordFunctionGuard no_callbacks;
    CloseAll();
    // A step still open ends here; the session's Finish() syncs the watch once more.
    if (watch_ != nullptr && watch_->recording()) {
      Guard("ops_stop", [&] { session_->EndOpsStep(nullptr); });
    }
  }
  handed_op_.reset();
  watch_ = nullptr;
  Guard("remove_callback", [&] { at::removeCallback(handle_); });
  handle_ = at::INVALID_CALLBACK_HANDLE;
  installed_ = false;
  epoch_ = 0;
  t_engine = nullptr;
  std::shared_ptr<CaptureEngine> keep = std::move(t_engine_ref);  // `this` outlives the reset.
}

void CaptureEngine::Abandon() { abandoned_.store(true, std::memory_order_relaxed); }

bool CaptureEngine::Guard(std::string_view cause, absl::FunctionRef<void()> fn) {
  return guest::GuardHook(tracer_->errors(), cause, fn);
}

// ---- Callbacks ----------------------------------------------------------------------------------

void CaptureEngine::OnStart(const at::RecordFunction& fn) {
  const at::RecordScope scope = fn.scope();
  if (scope == at::RecordScope::BACKWARD_FUNCTION) {
    marks_.push_back(Mark::kBackward);
    ++backward_depth_;
    return;
  }
  if (scope == at::RecordScope::TORCHSCRIPT_FUNCTION) {
    const bool root = mode_ == Mode::kTorchScript && script_depth_ == 0 && op_depth_ == 0 &&
                      backward_depth_ == 0 && !script_root_open_;
    ++script_depth_;
    marks_.push_back(Mark::kScriptFrame);
    if (!root) return;
    Guard("script_root", [&] {
      c10::ArrayRef<const c10::IValue> in = fn.inputs();
      if (in.empty() || !in[0].isObject() || &in[0].toObjectRef() != script_self_) return;
      at::DisableRecordFunctionGuard no_callbacks;
      CloseAll();
      CollectInputs(fn);
      Frame f;
      f.node = 0;
      f.scoped = true;
      OpenFrame(f);
      stack_.push_back(std::move(f));
      scopes_.push_back(0);
      script_root_open_ = true;
      marks_.back() = Mark::kScriptRoot;
    });
    return;
  }

  // Operators.
  const char* name = fn.name();
  if (op_depth_ == 0 && backward_depth_ == 0 &&
      StartsWith(name, "autograd::engine::evaluate_function")) {
    // The autograd engine runs a node (before the node's own pre-hooks): the backward starts.
    marks_.push_back(Mark::kBackward);
    ++backward_depth_;
    if (mode_ == Mode::kCppFrontend && scopes_.empty() && !stack_.empty()) {
      at::DisableRecordFunctionGuard no_callbacks;
      CloseAll();
    }
    return;
  }
  if (op_depth_++ > 0 || backward_depth_ > 0) {
    marks_.push_back(Mark::kIgnored);
    return;
  }
  marks_.push_back(Mark::kTopLevel);
  op_marks_.push_back(-1);
  // Under the trampoline's guard: a failure leaves the operator unattributed, marks balanced.
  at::DisableRecordFunctionGuard no_callbacks;
  const int32_t target = TargetOf(fn);
  if (target < 0) {
    if (!stack_.empty() && IsInPlaceName(name)) CloseIfMutated(fn);
    return;
  }
  CollectInputs(fn);
  // OpenFrame sets hand_over_op_ when this operator begins the op watch's step. The flags are
  // reset however this ends (a failure is caught by the trampoline's guard).
  struct ResetFlags {
    CaptureEngine* e;
    ~ResetFlags() { e->in_op_start_ = e->hand_over_op_ = false; }
  } reset{this};
  hand_over_op_ = false;
  in_op_start_ = true;
  TransitionTo(target);
  op_marks_.back() = static_cast<int32_t>(stack_.size());
  if (hand_over_op_ && watch_ != nullptr)
    handed_op_ = watch_->StartOp(fn);  // Its recorder missed it.
}

void CaptureEngine::CloseIfMutated(const at::RecordFunction& fn) {
  // An unattributed in-place operator on the last output of the innermost open call (a ReLU
  // with inplace=true after a convolution): close that call first, so that its outputs are
  // described before they change.
  c10::ArrayRef<const c10::IValue> in = fn.inputs();
  const Frame& top = stack_.back();
  if (in.empty() || !in[0].isTensor() || top.scoped || top.last == nullptr) return;
  const c10::TensorImpl* mutated = in[0].toTensor().unsafeGetTensorImpl();
  for (const at::Tensor& t : top.last->outputs) {
    if (t.unsafeGetTensorImpl() == mutated) {
      CloseAbove(stack_.size() - 1);
      return;
    }
  }
}

void CaptureEngine::OnEnd(const at::RecordFunction& fn) {
  const Clock::time_point end = Clock::now();
  if (marks_.empty()) return;
  const Mark mark = marks_.back();
  marks_.pop_back();
  switch (mark) {
    case Mark::kIgnored:
      --op_depth_;
      return;
    case Mark::kBackward:
      --backward_depth_;
      return;
    case Mark::kScriptFrame:
      --script_depth_;
      return;
    case Mark::kScriptRoot: {
      --script_depth_;
      script_root_open_ = false;
      at::DisableRecordFunctionGuard no_callbacks;
      if (std::uncaught_exceptions() > 0) {
        AbortAll();
      } else {
        CloseAll();
      }
      return;
    }
    case Mark::kTopLevel:
      break;
  }
  --op_depth_;
  if (handed_op_ != nullptr) {
    at::DisableRecordFunctionGuard no_callbacks;
    watch_->EndOp(fn, std::move(handed_op_));
  }
  if (op_marks_.empty()) return;
  const int32_t frames = op_marks_.back();
  op_marks_.pop_back();
  if (frames <= 0) return;
  // Under the trampoline's guard (the marks are already popped).
  if (std::uncaught_exceptions() > 0) {  // The operator raised: the calls it was part of, too.
    at::DisableRecordFunctionGuard no_callbacks;
    AbortAll();
    return;
  }
  auto result = std::make_shared<OpResult>();
  result->end = end;
  for (const c10::IValue& v : fn.outputs()) {
    ForEachTensor(v, [&](const at::Tensor& t) {
      if (t.defined()) result->outputs.push_back(t);
    });
  }
  const size_t n = std::min(stack_.size(), static_cast<size_t>(frames));
  for (size_t i = 0; i < n; ++i) stack_[i].last = result;
}

// ---- Attribution --------------------------------------------------------------------------------

int32_t CaptureEngine::TargetOf(const at::RecordFunction& fn) {
  if (mode_ == Mode::kCppFrontend) return CppTarget(fn);
  const int32_t node = ScriptTarget();
  if (node != kUseParameters) return node;
  // No module in the hierarchy: an operator of the root's own code, or one that an optimisation
  // pass rewrote without its call stack (autodiff's batch_norm). Attribute it by the parameters it
  // takes; skip autodiff's bookkeeping (detach of the subgraph's inputs).
  if (tree_.size() == 1) return 0;  // The root is the only layer.
  if (std::strcmp(fn.name(), "aten::detach") == 0) return -1;
  const int32_t owner = OwnerTarget(fn, /*match_aliases=*/true);
  return owner == kSkip ? -1 : owner;
}

int32_t CaptureEngine::ScriptTarget() {
  if (!script_root_open_) return -1;
  std::vector<std::string> hierarchy = torch::jit::currentModuleHierarchy();
  if (auto it = hierarchy_cache_.find(hierarchy); it != hierarchy_cache_.end()) return it->second;
  std::vector<std::string_view> names;
  for (const ops::ScriptFrame& f : ops::ParseModuleHierarchy(hierarchy))
    names.push_back(f.instance);
  const int32_t node = names.empty() ? kUseParameters : tree_.Resolve(names);
  if (hierarchy_cache_.size() >= kMaxHierarchyCache) hierarchy_cache_.clear();
  hierarchy_cache_.emplace(std::move(hierarchy), node);
  return node;
}

int32_t CaptureEngine::OwnerTarget(const at::RecordFunction& fn, bool match_aliases) {
  c10::ArrayRef<const c10::IValue> in = fn.inputs();
  const bool in_place = IsInPlaceName(fn.name());
  const bool no_grad = !c10::GradMode::is_enabled();
  int32_t owner = -1;
  bool skip = false;
  bool first_tensor = true;
  for (const c10::IValue& v : in) {
    ForEachTensor(v, [&](const at::Tensor& t) {
      if (!t.defined()) return;
      const bool first = first_tensor;
      first_tensor = false;
      int32_t o = tree_.OwnerOf(t.unsafeGetTensorImpl());
      if (o < 0 && match_aliases && t.has_storage()) o = tree_.OwnerOfData(t.storage().data());
      if (o < 0) return;
      if (in_place && first) skip = true;  // An update of the parameter (optimizer, init).
      if (no_grad && t.requires_grad()) {
        // A parameter combined with its own gradient: an optimizer's weight decay.
        const at::Tensor& g = t.grad();
        if (g.defined() && g.has_storage()) {
          const void* gdata = g.storage().data();
          for (const c10::IValue& u : in) {
            ForEachTensor(u, [&](const at::Tensor& x) {
              if (x.defined() && x.has_storage() && x.storage().data() == gdata) skip = true;
            });
          }
        }
      }
      owner = owner < 0 ? o : tree_.CommonAncestor(owner, o);
    });
  }
  return skip ? kSkip : owner;
}

int32_t CaptureEngine::CppTarget(const at::RecordFunction& fn) {
  const int32_t owner = OwnerTarget(fn, /*match_aliases=*/false);
  if (owner == kSkip) return -1;
  const int32_t base = ScopeBase();
  if (base >= 0) {
    const int32_t scope = stack_[base].node;
    if (owner < 0 || !tree_.IsAncestorOrSelf(scope, owner)) return scope;
    return owner;
  }
  if (root_scoped_) return -1;  // The forward is marked by a root scope; this op is outside it.
  return owner;
}

void CaptureEngine::CollectInputs(const at::RecordFunction& fn) {
  inputs_.clear();
  for (const c10::IValue& v : fn.inputs()) {
    ForEachTensor(v, [&](const at::Tensor& t) {
      if (t.defined() && !tree_.IsParamOrAlias(t)) inputs_.push_back(t);
    });
  }
}

// ---- Frames -------------------------------------------------------------------------------------

bool CaptureEngine::IsOpen(int32_t node) const {
  for (const Frame& f : stack_) {
    if (f.node == node) return true;
  }
  return false;
}

void CaptureEngine::TransitionTo(int32_t target) {
  int32_t base = ScopeBase();
  if (mode_ == Mode::kCppFrontend && base < 0 && !stack_.empty() && target == first_target_ &&
      !IsOpen(target)) {
    CloseAll();  // The forward's first module again: a new forward pass.
  }
  if (stack_.empty()) first_target_ = target;
  base = ScopeBase();
  size_t start = 0;
  if (base >= 0) {
    const int32_t from = stack_[base].node;
    start = static_cast<size_t>(base) + 1;
    if (!tree_.IsAncestorOrSelf(from, target)) target = from;
    tree_.PathBetween(from, target, &path_);
  } else {
    tree_.PathBetween(-1, target, &path_);
  }
  size_t keep = 0;
  while (keep < path_.size() && start + keep < stack_.size() &&
         stack_[start + keep].node == path_[keep]) {
    ++keep;
  }
  CloseAbove(start + keep);
  OpenPending();
  for (size_t i = keep; i < path_.size(); ++i) {
    Frame f;
    f.node = path_[i];
    OpenFrame(f);
    stack_.push_back(std::move(f));
  }
}

void CaptureEngine::OpenPending() {
  for (Frame& f : stack_) {
    if (!f.opened) OpenFrame(f);
  }
}

void CaptureEngine::OpenFrame(Frame& f) {
  f.opened = true;
  f.pass = -1;
  f.call = tracer_->BeginCall(tree_.node(f.node).layer, f.node == 0, inputs_);
  if (watch_ == nullptr || f.call == agent::Tracer::kNoCall) return;
  Guard("ops_begin", [&] {
    if (f.node != 0) {
      const ModuleNode& n = tree_.node(f.node);
      f.pass = watch_->PushModule(n.full_name, n.type, inputs_, n.params);
      return;
    }
    if (session_->BeginOpsStep(inputs_) && in_op_start_) hand_over_op_ = true;
  });
}

void CaptureEngine::OpsClose(Frame& f, const std::vector<at::Tensor>* outputs) {
  if (watch_ == nullptr) return;
  Guard("ops_end", [&] {
    if (f.node != 0) {
      if (f.pass >= 0) watch_->PopModule(f.pass, outputs != nullptr ? *outputs : inputs_none_);
      f.pass = -1;
      return;
    }
    if (!watch_->recording()) return;
    handed_op_.reset();
    session_->EndOpsStep(outputs);
  });
}

void CaptureEngine::CloseFrame(Frame& f) {
  if (!f.opened) return;
  // The backward starts under no-grad; the hooks EndCall registers need grad mode on (they are
  // registered only on outputs that have a grad_fn, i.e. that were made with grad mode on).
  c10::AutoGradMode grad_mode(true);
  if (f.last != nullptr) {
    tracer_->EndCall(f.call, f.last->outputs, f.last->end);
    OpsClose(f, &f.last->outputs);
  } else {
    tracer_->EndCall(f.call, {}, Clock::now());
    OpsClose(f, &inputs_none_);
  }
  f.opened = false;
  f.last.reset();
}

void CaptureEngine::CloseAbove(size_t keep) {
  while (stack_.size() > keep) {
    CloseFrame(stack_.back());
    stack_.pop_back();
  }
  while (!scopes_.empty() && static_cast<size_t>(scopes_.back()) >= keep) scopes_.pop_back();
}

void CaptureEngine::CloseAll() { CloseAbove(0); }

void CaptureEngine::AbortAll() {
  while (!stack_.empty()) {
    if (stack_.back().opened) {
      tracer_->AbortCall(stack_.back().call);
      OpsClose(stack_.back(), nullptr);
    }
    stack_.pop_back();
  }
  scopes_.clear();
}

// ---- ModuleScope --------------------------------------------------------------------------------

int32_t CaptureEngine::PushScope(const torch::nn::Module* module, std::string_view block_name) {
  if (mode_ != Mode::kCppFrontend || !installed_ || abandoned() || backward_depth_ > 0) return -1;
  int32_t token = -1;
  Guard("module_scope", [&] { token = OpenScope(module, block_name); });
  return token;
}

int32_t CaptureEngine::OpenScope(const torch::nn::Module* module, std::string_view block_name) {
  int32_t node = tree_.NodeOf(module);
  if (node < 0) return -1;
  if (!block_name.empty()) {
    absl::StatusOr<int32_t> block = tree_.BlockNode(node, block_name, *tracer_);
    if (!block.ok()) {
      tracer_->errors().Record("module_scope", block.status().ToString());
      return -1;
    }
    node = *block;
  }
  at::DisableRecordFunctionGuard no_callbacks;
  int32_t base = ScopeBase();
  if (node == 0) {
    root_scoped_ = true;
    if (base < 0) CloseAll();  // Leftovers of an unscoped forward.
  } else if (base < 0 && !stack_.empty() && node == first_target_ && !IsOpen(node)) {
    CloseAll();
  }
  if (stack_.empty()) first_target_ = node;
  base = ScopeBase();
  size_t start = 0;
  if (base >= 0) {
    const int32_t from = stack_[base].node;
    start = static_cast<size_t>(base) + 1;
    if (from != node && tree_.IsAncestorOrSelf(from, node)) {
      tree_.PathBetween(from, node, &path_);
    } else {
      path_.assign(1, node);
    }
  } else {
    tree_.PathBetween(-1, node, &path_);
  }
  // The scope's own module starts a new call, even when a call of it is open.
  size_t keep = 0;
  while (keep + 1 < path_.size() && start + keep < stack_.size() &&
         stack_[start + keep].node == path_[keep]) {
    ++keep;
  }
  CloseAbove(start + keep);
  for (size_t i = keep; i < path_.size(); ++i) {
    Frame f;
    f.node = path_[i];
    stack_.push_back(std::move(f));
  }
  stack_.back().scoped = true;
  scopes_.push_back(static_cast<int32_t>(stack_.size() - 1));
  return static_cast<int32_t>(scopes_.size() - 1);
}

void CaptureEngine::PopScope(int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= scopes_.size()) return;
  Guard("module_scope", [&] {
    at::DisableRecordFunctionGuard no_callbacks;
    const size_t index = static_cast<size_t>(scopes_[token]);
    CloseAbove(index);
    scopes_.resize(std::min(scopes_.size(), static_cast<size_t>(token)));
  });
}

}  // namespace tracetorch::libtorch_internal
