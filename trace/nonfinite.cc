#include "trace/nonfinite.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace tracetorch {

bool IsMaskCounts(int64_t nan_count, int64_t inf_count, int64_t neg_inf_count,
                  bool finite_all_zero) {
  return nan_count == 0 && inf_count > 0 && neg_inf_count == inf_count && finite_all_zero;
}

bool IsMask(const TensorInfo& t) {
  return IsMaskCounts(NanCount(t), InfCount(t), NegInfCount(t), FiniteAllZero(t));
}

bool CarriesTrouble(const TensorInfo& t) {
  if (NanCount(t) > 0) return true;
  return InfCount(t) > 0 && !IsMask(t);
}

bool AnyTrouble(const std::vector<TensorInfo>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(), CarriesTrouble);
}

bool AnyNan(const std::vector<TensorInfo>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(),
                     [](const TensorInfo& t) { return NanCount(t) > 0; });
}

bool GradTrouble(bool has_nan, const std::optional<double>& norm) {
  return has_nan || (norm.has_value() && !std::isfinite(*norm));
}

bool ActivationTrouble(const LayerTrace& layer) {
  return layer.has_nan || (layer.has_inf && !layer.inf_in_masks_only);
}

// ---- The op level -------------------------------------------------------------------------------

namespace {

// The output `k` of op `i`, or nullptr.
const TensorInfo* OpOutput(const OpGraph& g, int32_t i, int32_t k) {
  if (i < 0 || static_cast<size_t>(i) >= g.ops.size()) return nullptr;
  const std::vector<TensorInfo>& outs = g.ops[static_cast<size_t>(i)].outputs;
  if (k < 0 || static_cast<size_t>(k) >= outs.size()) return nullptr;
  return &outs[static_cast<size_t>(k)];
}

const TensorInfo* GraphInput(const OpGraph& g, int32_t i) {
  if (i < 0 || static_cast<size_t>(i) >= g.inputs.size()) return nullptr;
  return &g.inputs[static_cast<size_t>(i)].tensor;
}

uint64_t Key(int32_t op, int32_t output) {
  return static_cast<uint64_t>(static_cast<uint32_t>(op)) << 32 | static_cast<uint32_t>(output);
}

}  // namespace

OpTrouble FindOpTrouble(const OpGraph& g) {
  OpTrouble r;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (NanCount(g.inputs[i].tensor) > 0) {  // A NaN is always trouble.
      r.input = static_cast<int32_t>(i);
      break;
    }
  }
  // Almost every step is clean: one pass over the counts decides that, before anything is built.
  bool any_trouble = false;
  for (const OpNode& op : g.ops) {
    bool nonfinite = false;
    for (const TensorInfo& t : op.outputs) {
      if (NanCount(t) == 0 && InfCount(t) == 0) continue;
      nonfinite = true;
      any_trouble = any_trouble || CarriesTrouble(t);
    }
    if (nonfinite) ++r.nonfinite_ops;
  }
  if (r.input || !any_trouble) return r;

  // The op outputs a module pass (the root's included) or the model returned.
  absl::flat_hash_set<uint64_t> returned;
  auto note = [&](const OpSource& s) {
    if (s.kind == OpSource::Kind::kOp) returned.insert(Key(s.index, s.output));
  };
  for (const ModulePass& m : g.modules) {
    for (const OpSource& s : m.outputs) note(s);
  }
  for (const OpSource& s : g.outputs) note(s);
  for (size_t i = 0; i < g.ops.size() && !r.mattered; ++i) {
    const std::vector<TensorInfo>& outs = g.ops[i].outputs;
    for (size_t k = 0; k < outs.size(); ++k) {
      const TensorInfo& t = outs[k];
      if (NanCount(t) > 0 ||
          (CarriesTrouble(t) &&
           returned.contains(Key(static_cast<int32_t>(i), static_cast<int32_t>(k))))) {
        r.mattered = static_cast<int32_t>(i);
        break;
      }
    }
  }
  if (!r.mattered) return r;

  // Walk back from what mattered through the inputs that carried trouble.
  std::vector<int32_t> stack = {*r.mattered};
  absl::flat_hash_set<int32_t> seen = {*r.mattered};
  int32_t earliest = *r.mattered;
  std::optional<int32_t> input;
  while (!stack.empty()) {
    const int32_t i = stack.back();
    stack.pop_back();
    earliest = std::min(earliest, i);
    for (const OpInput& in : g.ops[static_cast<size_t>(i)].inputs) {
      const OpSource& s = in.source;
      if (s.kind == OpSource::Kind::kOp) {
        const TensorInfo* t = OpOutput(g, s.index, s.output);
        if (t != nullptr && CarriesTrouble(*t) && seen.insert(s.index).second) {
          stack.push_back(s.index);
        }
      } else if (s.kind == OpSource::Kind::kInput) {
        const TensorInfo* t = GraphInput(g, s.index);
        if (t != nullptr && CarriesTrouble(*t) && (!input || s.index < *input)) input = s.index;
      }
    }
  }
  if (input) {
    r.input = input;
  } else {
    r.origin = earliest;
  }
  return r;
}

// ---- The layer level ----------------------------------------------------------------------------

bool LayerOriginFinder::Set(NanOrigin origin) {
  if (origin_) return false;
  origin_ = std::move(origin);
  return true;
}

bool LayerOriginFinder::Adopt(NanOrigin origin) {
  if (!origin_) return Set(std::move(origin));
  if (!origin_->op.empty() || origin.op.empty() || origin_->layer != origin.layer ||
      origin_->step != origin.step || origin_->backward != origin.backward) {
    return false;
  }
  origin_->op = std::move(origin.op);
  origin_->op_func = std::move(origin.op_func);
  origin_->op_module = std::move(origin.op_module);
  return true;
}

bool LayerOriginFinder::RootBegin(int64_t step, const std::vector<TensorInfo>& inputs) {
  input_trouble_ = false;
  mattered_ = false;
  candidate_.reset();
  candidate_seq_ = 0;
  if (EndBackward()) return true;  // The previous step's backward is over.
  if (origin_) return false;
  if (AnyNan(inputs)) {
    return Set(NanOrigin{std::string(NanOrigin::kModelInput), step, /*is_nan=*/true});
  }
  // An Inf outside a mask in the input is trouble only once it matters (RootEnd decides).
  input_trouble_ = AnyTrouble(inputs);
  return false;
}

bool LayerOriginFinder::CallEnd(std::string_view layer, int64_t step, uint64_t seq,
                                const std::vector<TensorInfo>& inputs,
                                const std::vector<TensorInfo>& outputs) {
  const bool in_trouble = AnyTrouble(inputs);
  const bool out_trouble = AnyTrouble(outputs);
  if (out_trouble || AnyNan(inputs)) mattered_ = true;
  if (in_trouble && (!candidate_ || seq < candidate_seq_)) {
    candidate_ = NanOrigin{std::string(layer), step, AnyNan(inputs)};
    candidate_seq_ = seq;
  }
  if (origin_ || in_trouble || !out_trouble) return false;
  return Set(NanOrigin{std::string(layer), step, AnyNan(outputs)});
}

bool LayerOriginFinder::RootEnd(int64_t step, const std::vector<TensorInfo>& outputs) {
  const bool out_trouble = AnyTrouble(outputs);
  const bool mattered = mattered_ || out_trouble;
  const bool input_trouble = input_trouble_;
  std::optional<NanOrigin> candidate = std::move(candidate_);
  input_trouble_ = false;
  mattered_ = false;
  candidate_.reset();
  if (origin_ || !mattered) return false;
  if (input_trouble) {
    return Set(NanOrigin{std::string(NanOrigin::kModelInput), step, /*is_nan=*/false});
  }
  if (candidate) return Set(*std::move(candidate));
  return Set(NanOrigin{std::string(NanOrigin::kModelCode), step, AnyNan(outputs)});
}

bool LayerOriginFinder::Backward(std::string_view layer, int64_t step,
                                 const BackwardSample& sample) {
  if (origin_) return false;
  const bool out_bad = GradTrouble(sample.grad_has_nan, sample.grad_norm);
  const bool in_bad = GradTrouble(sample.grad_in_has_nan, sample.grad_in_norm);
  if (out_bad) {
    // Already in its output gradient: made above this layer. An enclosing layer that completes
    // later with a finite output gradient made it (inner layers complete first); else the loss.
    if (!loss_candidate_) {
      loss_candidate_ = NanOrigin{std::string(NanOrigin::kLoss), step, sample.grad_has_nan};
      loss_candidate_->backward = true;
    }
    return false;
  }
  if (!in_bad) return false;
  NanOrigin o{std::string(layer), step, sample.grad_in_has_nan};
  o.backward = true;
  loss_candidate_.reset();
  return Set(std::move(o));
}

bool LayerOriginFinder::EndBackward() {
  if (!loss_candidate_) return false;
  NanOrigin o = *std::move(loss_candidate_);
  loss_candidate_.reset();
  return Set(std::move(o));
}

}  // namespace tracetorch
