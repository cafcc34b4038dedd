// The operator-level capture behind tracetorch::TraceSession: thread-local RecordFunction callbacks
// that turn a stream of ATen operators into nested module calls on an agent::Tracer.
//
// Model: every top-level operator (one not nested in another operator, nor in a backward function)
// gets a target module. The engine keeps a stack of open module calls (frames) and, before the
// operator runs, makes the stack equal to the path root -> target: frames off the path are closed
// (Tracer::EndCall with the outputs and end time of their last operator), missing ones are opened
// (Tracer::BeginCall with the operator's inputs, parameters and buffers left out). When the
// operator ends, its outputs and end time become the last operator of every frame on the path.
//  - TorchScript: the target comes from torch::jit::currentModuleHierarchy() (cached per distinct
//    hierarchy); the root call is the interpreter frame of the module's method (its inputs are the
//    model inputs) and ends with it.
//  - C++ frontend: the target is the owner of the parameters/buffers the operator takes (their
//    common ancestor when several), refined by the innermost ModuleScope; an operator with none is
//    not attributed and leaves the stack as is. The forward pass ends at the root ModuleScope's
//    end, else when the backward pass starts on this thread, when the first module of the forward
//    is entered again, or at Stop(). In-place updates of parameters (optimizers, init) and
//    no-grad operators that combine a parameter with its own gradient (weight decay) are skipped.
//
// The engine records into an agent::Session (agent/session.h), which owns the Tracer, the daemon
// stream, the watch file and the op watch.
//
// Op-level NaN origin (TraceSessionOptions::ops = kOnNan): when the session has an op watch at
// Install(), the engine also drives it from its module calls, so that the op graph follows the
// same calls as the layer trace: the root call is the watch's step (Session::BeginOpsStep /
// EndOpsStep, which publish and stream a kept graph), every other call a module pass
// (PushModule/PopModule with the call's inputs and outputs). A C++-frontend forward begins inside
// its first operator's start callback: that operator is handed to the watch by hand
// (NanOpWatch::StartOp/EndOp).
//
// Thread-safety: one engine per session; every method runs on the owner thread (the callbacks are
// thread-local, ModuleScope is used by the forward() running on it), except Abandon(). The
// Session and its Tracer are thread-safe (but for the op watch, owner thread only).
#ifndef TRACETORCH_AGENT_LIBTORCH_CAPTURE_ENGINE_H_
#define TRACETORCH_AGENT_LIBTORCH_CAPTURE_ENGINE_H_

#include <ATen/record_function.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "agent/libtorch/module_tree.h"
#include "agent/ops/nan_op_watch.h"
#include "agent/session.h"
#include "agent/tracer.h"

namespace tracetorch::libtorch_internal {

class CaptureEngine : public std::enable_shared_from_this<CaptureEngine> {
 public:
  enum class Mode { kTorchScript, kCppFrontend };
  using Clock = std::chrono::steady_clock;

  // `script_self`: the TorchScript module object whose methods are roots (kTorchScript only).
  CaptureEngine(std::shared_ptr<agent::Session> session, ModuleTree tree, Mode mode,
                const void* script_self);
  ~CaptureEngine();
  CaptureEngine(const CaptureEngine&) = delete;
  CaptureEngine& operator=(const CaptureEngine&) = delete;

  // Installs the callbacks on the calling thread, driving the session's op watch if it has one.
  // FailedPrecondition when an engine is already installed on it. The session must have been
  // started.
  absl::Status Install();
  // Closes open calls, removes the callbacks. REQUIRES: the thread of Install().
  void Uninstall();
  bool installed() const { return installed_; }
  // For a session destroyed on another thread than its Start(): the callbacks, which only that
  // thread can remove, do nothing from now on (the next Install() on that thread removes them).
  // Thread-safe.
  void Abandon();
  bool abandoned() const { return abandoned_.load(std::memory_order_relaxed); }

  // The engine installed on the calling thread, or nullptr.
  static CaptureEngine* Current();
  uint64_t epoch() const { return epoch_; }

  // ModuleScope entry points: returns a token (>= 0) for PopScope, or -1 when not traced.
  int32_t PushScope(const torch::nn::Module* module, std::string_view block_name);
  void PopScope(int32_t token);

  ModuleTree& tree() { return tree_; }
  agent::Tracer& tracer() { return *tracer_; }

  // RecordFunction callbacks (public for the trampolines only).
  void OnStart(const at::RecordFunction& fn);
  void OnEnd(const at::RecordFunction& fn);

 private:
  // The outputs and end time of one top-level operator, shared by the frames it ends.
  struct OpResult {
    std::vector<at::Tensor> outputs;
    Clock::time_point end;
  };
  struct Frame {
    int32_t node = 0;
    agent::Tracer::CallId call = agent::Tracer::kNoCall;
    bool opened = false;
    bool scoped = false;  // Held open by a ModuleScope (or the TorchScript root frame).
    int32_t pass = -1;    // The op watch's module pass (-1: none).
    std::shared_ptr<const OpResult> last;
  };
  enum class Mark : uint8_t { kIgnored, kTopLevel, kBackward, kScriptFrame, kScriptRoot };

  static constexpr int32_t kUseParameters = -2;  // ScriptTarget(): no module in the hierarchy.
  static constexpr int32_t kSkip = -3;           // OwnerTarget(): a parameter update.

  // Target module of a top-level operator, or -1 when it is not attributed.
  int32_t TargetOf(const at::RecordFunction& fn);
  int32_t CppTarget(const at::RecordFunction& fn);
  // The module of the running TorchScript instruction, kUseParameters, or -1 outside the root.
  int32_t ScriptTarget();
  // The common ancestor of the owners of the parameters/buffers `fn` takes (`match_aliases`: or
  // aliases of their storage), -1 for none, kSkip for an in-place update of a parameter or a
  // no-grad operator combining one with its gradient.
  int32_t OwnerTarget(const at::RecordFunction& fn, bool match_aliases);
  void CloseIfMutated(const at::RecordFunction& fn);
  // Index of the innermost scoped frame, or -1.
  int32_t ScopeBase() const { return scopes_.empty() ? -1 : scopes_.back(); }
  // Makes the stack equal to the scoped base frames + the path to `target`; opens frames with
  // inputs_.
  void TransitionTo(int32_t target);
  void OpenPending();
  bool IsOpen(int32_t node) const;
  void CloseAbove(size_t keep);  // Closes frames [keep, size) innermost first.
  void CloseAll();
  void AbortAll();
  void CloseFrame(Frame& f);
  // Tracer::BeginCall for `f` with inputs_ (and the op watch's step or pass).
  void OpenFrame(Frame& f);
  // The op watch's side of a frame that ended with `outputs` (nullptr: it raised).
  void OpsClose(Frame& f, const std::vector<at::Tensor>* outputs);
  // Fills inputs_ with the operator's tensor inputs that are not parameters or buffers (or
  // aliases of their storage).
  void CollectInputs(const at::RecordFunction& fn);
  // PushScope's work, under its guard.
  int32_t OpenScope(const torch::nn::Module* module, std::string_view block_name);
  // guest::GuardHook with the session's hook error counter: true when `fn` returned normally.
  bool Guard(std::string_view cause, absl::FunctionRef<void()> fn);

  // Constant after construction.
  const std::shared_ptr<agent::Session> session_;
  agent::Tracer* const tracer_;  // session_'s.
  const Mode mode_;
  const void* const script_self_;

  ModuleTree tree_;
  std::atomic<bool> abandoned_{false};
  uint64_t epoch_ = 0;  // Distinct per Install(); 0 when not installed.
  bool installed_ = false;
  at::CallbackHandle handle_ = at::INVALID_CALLBACK_HANDLE;

  std::vector<Mark> marks_;        // One per started callback, popped at its end.
  std::vector<int32_t> op_marks_;  // Per top-level operator: frames it ends, -1 if not attributed.
  int32_t op_depth_ = 0;           // Operators open (nested ones included).
  int32_t backward_depth_ = 0;
  int32_t script_depth_ = 0;
  bool script_root_open_ = false;
  bool root_scoped_ = false;   // A ModuleScope on the root was seen: ignore unscoped ops.
  int32_t first_target_ = -1;  // C++: target of the forward's first operator.

  std::vector<Frame> stack_;
  std::vector<int32_t> scopes_;     // Stack indexes of scoped frames (ModuleScope / script root).
  std::vector<at::Tensor> inputs_;  // Scratch: the current operator's inputs.
  std::vector<int32_t> path_;       // Scratch.
  std::vector<int32_t> owners_;     // Scratch.
  const std::vector<at::Tensor> inputs_none_;  // Empty: a frame that ended with no operator.
  absl::flat_hash_map<std::vector<std::string>, int32_t> hierarchy_cache_;

  // The session's op watch while installed (ops = kOnNan; null otherwise). Owner thread only.
  ops::NanOpWatch* watch_ = nullptr;
  bool in_op_start_ = false;   // Inside a top-level operator's OnStart (C++ frontend).
  bool hand_over_op_ = false;  // That operator began the watch's step: hand it over.
  std::unique_ptr<at::ObserverContext> handed_op_;  // Its recorder context until its end.
};

}  // namespace tracetorch::libtorch_internal

#endif  // TRACETORCH_AGENT_LIBTORCH_CAPTURE_ENGINE_H_
