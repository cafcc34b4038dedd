#include "trace/nonfinite.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trace/aggregator.h"
#include "trace/anomaly.h"
#include "trace/json.h"
#include "trace/op_audit.h"

namespace tracetorch {
namespace {

// A tensor with these counts (statistics off: the counts only).
TensorInfo Counts(int64_t nan, int64_t inf, int64_t neg_inf = 0, bool finite_all_zero = false) {
  TensorInfo t;
  t.shape = {4, 4};
  t.dtype = "torch.float32";
  t.device = "cpu";
  t.nonfinite = NonFiniteCounts{nan, inf, neg_inf, finite_all_zero};
  return t;
}

const TensorInfo kFinite = Counts(0, 0);
// nn.Transformer.generate_square_subsequent_mask(4): 0 on and below the diagonal, -inf above.
const TensorInfo kCausalMask = Counts(0, 6, 6, true);
// Attention scores after the mask was added: -inf beside non-zero finite scores.
const TensorInfo kMaskedScores = Counts(0, 6, 6, false);
const TensorInfo kOverflow = Counts(0, 3, 1, false);  // +Inf and -Inf: a bf16 overflow.
const TensorInfo kNan = Counts(2, 0);

TEST(Mask, IsZeroAndMinusInfOnly) {
  EXPECT_TRUE(IsMask(kCausalMask));
  EXPECT_TRUE(IsMask(Counts(0, 16, 16, true)));  // full((T, T), -inf) before triu.
  EXPECT_FALSE(IsMask(kMaskedScores));           // Non-zero finite values beside the -inf.
  EXPECT_FALSE(IsMask(kOverflow));               // A +Inf.
  EXPECT_FALSE(IsMask(Counts(1, 6, 6, true)));   // A NaN.
  EXPECT_FALSE(IsMask(kFinite));                 // Nothing non-finite: no mask, no trouble.
  // A reader of a file without the facts (tracetorch-ml) keeps 0 / false: every Inf counts.
  EXPECT_FALSE(IsMask(Counts(0, 6)));
}

TEST(Mask, TroubleIsNanOrInfOutsideAMask) {
  EXPECT_FALSE(CarriesTrouble(kFinite));
  EXPECT_FALSE(CarriesTrouble(kCausalMask));
  EXPECT_TRUE(CarriesTrouble(kMaskedScores));
  EXPECT_TRUE(CarriesTrouble(kOverflow));
  EXPECT_TRUE(CarriesTrouble(kNan));
  EXPECT_TRUE(GradTrouble(false, std::numeric_limits<double>::infinity()));
  EXPECT_TRUE(GradTrouble(true, 1.0));
  EXPECT_FALSE(GradTrouble(false, 1.0));
  EXPECT_FALSE(GradTrouble(false, std::nullopt));
}

// ---- Op graphs ----------------------------------------------------------------------------------

// A small attention-like graph built op by op: each op reads `parents` (op indexes; -1: the input)
// and produces `out`, inside module pass `pass`.
struct GraphBuilder {
  OpGraph g;
  GraphBuilder() {
    g.inputs.push_back(OpGraphInput{"input", kFinite});
    g.modules.push_back(ModulePass{});  // The root pass.
  }
  int32_t Pass(std::string path) {
    ModulePass m;
    m.path = std::move(path);
    m.parent = 0;
    g.modules.push_back(m);
    return static_cast<int32_t>(g.modules.size() - 1);
  }
  int32_t Op(std::string func, std::vector<int32_t> parents, TensorInfo out, int32_t pass = 0) {
    OpNode n;
    n.func_name = func;
    n.index = static_cast<int32_t>(g.ops.size()) + 1;
    n.call_index = 1;
    n.label = OpLabel(func, 1, n.index);
    n.module_pass = pass;
    for (int32_t p : parents) {
      OpInput in;
      in.source =
          p < 0 ? OpSource{OpSource::Kind::kInput, 0, 0} : OpSource{OpSource::Kind::kOp, p, 0};
      if (p >= 0) n.parents.push_back(p);
      n.inputs.push_back(in);
    }
    n.outputs.push_back(std::move(out));
    g.ops.push_back(std::move(n));
    const int32_t i = static_cast<int32_t>(g.ops.size() - 1);
    if (g.modules[pass].first_op < 0) g.modules[pass].first_op = i;
    g.modules[pass].last_op = i;
    return i;
  }
  void Returns(int32_t pass, int32_t op) {
    g.modules[pass].outputs.push_back(OpSource{OpSource::Kind::kOp, op, 0});
    g.ops[op].output_of.push_back(pass);
  }
};

TEST(FindOpTrouble, AMaskAbsorbedBySoftmaxIsNoTrouble) {
  GraphBuilder b;
  const int32_t attn = b.Pass("blocks.0.attn");
  const int32_t full = b.Op("full", {}, Counts(0, 16, 16, true), attn);
  const int32_t mask = b.Op("triu", {full}, kCausalMask, attn);
  const int32_t scores = b.Op("matmul", {-1, -1}, kFinite, attn);
  const int32_t masked = b.Op("add", {scores, mask}, kMaskedScores, attn);
  const int32_t soft = b.Op("softmax", {masked}, kFinite, attn);
  b.Returns(attn, soft);
  const OpTrouble t = FindOpTrouble(b.g);
  EXPECT_FALSE(t.matters());
  EXPECT_EQ(t.nonfinite_ops, 3);
}

TEST(FindOpTrouble, MaskedFillScoresAbsorbedAreNoTrouble) {
  GraphBuilder b;
  const int32_t attn = b.Pass("attn");
  const int32_t scores = b.Op("matmul", {-1, -1}, kFinite, attn);
  const int32_t masked = b.Op("masked_fill", {scores}, kMaskedScores, attn);
  b.Returns(attn, b.Op("softmax", {masked}, kFinite, attn));
  EXPECT_FALSE(FindOpTrouble(b.g).matters());
}

TEST(FindOpTrouble, MaskedScoresReturnedByAModuleMatter) {
  GraphBuilder b;
  const int32_t scores_pass = b.Pass("scores");
  const int32_t scores = b.Op("matmul", {-1, -1}, kFinite, scores_pass);
  const int32_t masked = b.Op("masked_fill", {scores}, kMaskedScores, scores_pass);
  b.Returns(scores_pass, masked);
  const OpTrouble t = FindOpTrouble(b.g);
  ASSERT_TRUE(t.origin.has_value());
  EXPECT_EQ(*t.origin, masked);
}

TEST(FindOpTrouble, AMaskReturnedByAModuleIsNoTrouble) {
  GraphBuilder b;
  const int32_t maker = b.Pass("mask");
  const int32_t full = b.Op("full", {}, Counts(0, 16, 16, true), maker);
  b.Returns(maker, b.Op("triu", {full}, kCausalMask, maker));
  EXPECT_FALSE(FindOpTrouble(b.g).matters());
}

TEST(FindOpTrouble, NanWalksBackToTheFirstOpWithCleanInputs) {
  GraphBuilder b;
  const int32_t mlp = b.Pass("blocks.1.mlp");
  const int32_t fc = b.Op("linear", {-1}, kFinite, mlp);
  const int32_t logged = b.Op("log", {fc}, kNan, mlp);
  const int32_t act = b.Op("gelu", {logged}, kNan, mlp);
  b.Returns(mlp, act);
  const OpTrouble t = FindOpTrouble(b.g);
  ASSERT_TRUE(t.origin.has_value());
  EXPECT_EQ(*t.origin, logged);
  EXPECT_EQ(*t.mattered, logged);
}

TEST(FindOpTrouble, AnInfMattersWhereItReachesAModuleOutput) {
  GraphBuilder b;
  const int32_t fc = b.Pass("fc");
  const int32_t scaled = b.Op("mul", {-1}, kOverflow, fc);  // Not returned yet: no trouble alone.
  const int32_t shifted = b.Op("add", {scaled}, kOverflow, fc);
  b.Returns(fc, shifted);
  const OpTrouble t = FindOpTrouble(b.g);
  EXPECT_EQ(*t.mattered, shifted);
  EXPECT_EQ(*t.origin, scaled);
}

TEST(FindOpTrouble, AnInfThatNeverMattersIsAbsorbed) {
  GraphBuilder b;
  const int32_t logged = b.Op("log", {-1}, kMaskedScores);  // log(0) = -inf ...
  b.Returns(0, b.Op("where", {logged}, kFinite));           // ... that `where` drops.
  const OpTrouble t = FindOpTrouble(b.g);
  EXPECT_FALSE(t.matters());
  EXPECT_EQ(t.nonfinite_ops, 1);
}

TEST(FindOpTrouble, SoftmaxOfAFullyMaskedRowWalksToWhereTheMaskWasApplied) {
  GraphBuilder b;
  const int32_t scores = b.Op("matmul", {-1}, kFinite);
  const int32_t mask = b.Op("triu", {}, kCausalMask);
  const int32_t masked = b.Op("add", {scores, mask}, kMaskedScores);
  const int32_t soft = b.Op("softmax", {masked}, kNan);
  b.Returns(0, soft);
  const OpTrouble t = FindOpTrouble(b.g);
  EXPECT_EQ(*t.mattered, soft);
  EXPECT_EQ(*t.origin, masked);  // The mask counts as clean: the walk stops where it was added.
}

TEST(FindOpTrouble, TroubleFromTheInput) {
  GraphBuilder b;
  b.g.inputs[0].tensor = kOverflow;
  const int32_t fc = b.Pass("fc");
  b.Returns(fc, b.Op("linear", {-1}, kOverflow, fc));
  const OpTrouble t = FindOpTrouble(b.g);
  EXPECT_FALSE(t.origin.has_value());
  EXPECT_EQ(t.input, 0);

  GraphBuilder nan;
  nan.g.inputs[0].tensor = kNan;
  nan.Op("linear", {-1}, kFinite);
  EXPECT_EQ(FindOpTrouble(nan.g).input, 0);  // A NaN input is trouble even when absorbed.

  GraphBuilder mask;
  mask.g.inputs[0].tensor = kCausalMask;  // A mask passed in as an input is no trouble.
  mask.Returns(0, mask.Op("add", {-1}, kMaskedScores));
  EXPECT_TRUE(FindOpTrouble(mask.g).matters());  // Returned masked scores are, though.
  EXPECT_FALSE(FindOpTrouble(mask.g).input.has_value());
}

TEST(OpAudit, UsesTheRuleNotTheGraphsOwnField) {
  GraphBuilder b;
  const int32_t attn = b.Pass("attn");
  const int32_t mask = b.Op("triu", {}, kCausalMask, attn);
  b.Returns(attn, b.Op("softmax", {mask}, kFinite, attn));
  b.g.nan_origin = mask;  // What the first-non-finite-op rule of older versions said.
  const OpAuditReport r = AuditOpGraph(b.g);
  EXPECT_FALSE(r.nan_origin.has_value());
  EXPECT_TRUE(r.nan_input.empty());
  EXPECT_EQ(r.nonfinite_ops, 1);
  EXPECT_NE(RenderOpAudit(r).find("none (1 op held only masks or -inf that was absorbed)"),
            std::string::npos);
}

// ---- Layers -------------------------------------------------------------------------------------

TEST(LayerOriginFinder, AMaskPassedToALayerIsNoTrouble) {
  LayerOriginFinder f;
  EXPECT_FALSE(f.RootBegin(0, {kFinite}));
  EXPECT_FALSE(f.CallEnd("blocks.0.attn", 0, 1, {kFinite, kCausalMask}, {kFinite}));
  EXPECT_FALSE(f.CallEnd("mask", 0, 2, {kFinite}, {kCausalMask}));
  EXPECT_FALSE(f.RootEnd(0, {kFinite}));
  EXPECT_FALSE(f.origin().has_value());
}

TEST(LayerOriginFinder, FirstLayerWithCleanInputsAndTroubledOutputs) {
  LayerOriginFinder f;
  f.RootBegin(3, {kFinite, kCausalMask});
  EXPECT_FALSE(f.CallEnd("blocks.1.mlp.fc", 3, 5, {kFinite}, {kFinite}));
  EXPECT_TRUE(f.CallEnd("blocks.1.mlp", 3, 4, {kFinite}, {kNan}));
  EXPECT_FALSE(f.CallEnd("blocks.1", 3, 3, {kFinite, kCausalMask}, {kNan}));
  EXPECT_FALSE(f.RootEnd(3, {kNan}));
  EXPECT_EQ(*f.origin(), (NanOrigin{"blocks.1.mlp", 3, true}));
}

TEST(LayerOriginFinder, TroubleFromCodeBetweenLayersNamesTheFirstLayerThatGotIt) {
  LayerOriginFinder f;
  f.RootBegin(0, {kFinite});
  f.CallEnd("a", 0, 1, {kFinite}, {kFinite});
  f.CallEnd("c", 0, 3, {kOverflow}, {kOverflow});
  f.CallEnd("b", 0, 2, {kOverflow}, {kOverflow});
  EXPECT_TRUE(f.RootEnd(0, {kOverflow}));
  EXPECT_EQ(*f.origin(), (NanOrigin{"b", 0, false}));
}

TEST(LayerOriginFinder, AbsorbedTroubleBetweenLayersIsNoOrigin) {
  LayerOriginFinder f;
  f.RootBegin(0, {kFinite});
  f.CallEnd("softmax", 0, 1, {kMaskedScores}, {kFinite});  // nn.Softmax fed masked scores.
  EXPECT_FALSE(f.RootEnd(0, {kFinite}));
  EXPECT_FALSE(f.origin().has_value());
}

TEST(LayerOriginFinder, TheModelInputAndTheModelsOwnCode) {
  LayerOriginFinder nan_input;
  EXPECT_TRUE(nan_input.RootBegin(2, {kNan}));
  EXPECT_EQ(nan_input.origin()->layer, NanOrigin::kModelInput);

  LayerOriginFinder inf_input;  // An Inf in the input is trouble once it matters.
  EXPECT_FALSE(inf_input.RootBegin(0, {kOverflow}));
  EXPECT_FALSE(inf_input.RootEnd(0, {kFinite}));
  EXPECT_FALSE(inf_input.RootBegin(1, {kOverflow}));
  inf_input.CallEnd("fc", 1, 1, {kOverflow}, {kOverflow});
  EXPECT_TRUE(inf_input.RootEnd(1, {kOverflow}));
  EXPECT_EQ(*inf_input.origin(), (NanOrigin{"<input>", 1, false}));

  LayerOriginFinder root;
  root.RootBegin(0, {kFinite});
  root.CallEnd("head", 0, 1, {kFinite}, {kFinite});
  EXPECT_TRUE(root.RootEnd(0, {kNan}));
  EXPECT_EQ(*root.origin(), (NanOrigin{"<root>", 0, true}));
}

BackwardSample Grad(bool out_nan, bool in_nan, double in_norm = 1.0) {
  BackwardSample s;
  s.grad_norm = out_nan ? std::nan("") : 1.0;
  s.grad_has_nan = out_nan;
  s.grad_in_norm = in_nan ? std::nan("") : in_norm;
  s.grad_in_has_nan = in_nan;
  return s;
}

TEST(LayerOriginFinder, TroubleBornInTheBackward) {
  LayerOriginFinder f;
  EXPECT_FALSE(f.Backward("head", 4, Grad(false, false)));
  // Made by blocks.1.mlp's own code after its last child: the child's output gradient holds it
  // first, and the enclosing layer, completing later with a finite output gradient, is named.
  EXPECT_FALSE(f.Backward("blocks.1.mlp.fc2", 4, Grad(true, true)));
  EXPECT_TRUE(f.Backward("blocks.1.mlp", 4, Grad(false, true)));
  EXPECT_FALSE(f.Backward("blocks.1", 4, Grad(true, true)));
  EXPECT_FALSE(f.EndBackward());
  NanOrigin want{"blocks.1.mlp", 4, true};
  want.backward = true;
  EXPECT_EQ(*f.origin(), want);

  LayerOriginFinder inf;  // An Inf gradient: its norm.
  EXPECT_TRUE(inf.Backward("fc", 0, Grad(false, false, std::numeric_limits<double>::infinity())));
  EXPECT_FALSE(inf.origin()->is_nan);

  LayerOriginFinder loss;
  EXPECT_FALSE(loss.Backward("head", 1, Grad(true, true)));
  EXPECT_FALSE(loss.Backward("body", 1, Grad(true, true)));
  EXPECT_TRUE(loss.RootBegin(2, {kFinite}));  // The next step: the backward of step 1 is over.
  EXPECT_EQ(loss.origin()->layer, NanOrigin::kLoss);
  EXPECT_EQ(loss.origin()->step, 1);
  EXPECT_TRUE(loss.origin()->backward);
}

TEST(LayerOriginFinder, AdoptsAnOriginOrItsOpOnly) {
  LayerOriginFinder none;
  NanOrigin absorbed{"blocks.0.mlp", 3, true};
  absorbed.op = "log_1_20";
  EXPECT_TRUE(none.Adopt(absorbed));  // The op level saw what the layers did not.
  EXPECT_EQ(*none.origin(), absorbed);

  LayerOriginFinder known;
  known.RootBegin(2, {kFinite});
  known.CallEnd("blocks.1.mlp", 2, 1, {kFinite}, {kNan});
  NanOrigin named{"blocks.1.mlp", 2, true};
  named.op = "log_1_30";
  named.op_func = "log";
  named.op_module = "blocks.1.mlp";
  NanOrigin elsewhere = named;
  elsewhere.layer = "blocks.0";
  EXPECT_FALSE(known.Adopt(elsewhere));  // Another origin: the first stays.
  EXPECT_TRUE(known.origin()->op.empty());
  EXPECT_TRUE(known.Adopt(named));  // The same origin, now with its op.
  EXPECT_EQ(*known.origin(), named);
  EXPECT_FALSE(known.Adopt(named));
}

// ---- Aggregation, anomalies, files --------------------------------------------------------------

TEST(NonFiniteRecord, MaskLayersRaiseNoAnomalyAndOthersDo) {
  TraceAggregator agg;
  const auto mask = *agg.DeclareLayer({"mask", "MaskMaker", "mask", 1, 0});
  const auto scores = *agg.DeclareLayer({"scores", "Scores", "scores", 1, 0});
  ForwardSample m;
  m.outputs = {kCausalMask};
  ASSERT_TRUE(agg.AddForward(mask, m).ok());
  ASSERT_TRUE(agg.AddForward(mask, m).ok());
  ForwardSample s;
  s.outputs = {kMaskedScores};
  ASSERT_TRUE(agg.AddForward(scores, s).ok());
  const TraceRecord r = agg.Snapshot();
  EXPECT_TRUE(r.layers[0].has_inf);
  EXPECT_TRUE(r.layers[0].inf_in_masks_only);
  EXPECT_TRUE(r.layers[1].has_inf);
  EXPECT_FALSE(r.layers[1].inf_in_masks_only);
  const std::vector<Anomaly> found = *DetectAnomalies(r);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, AnomalyType::kInfActivation);
  EXPECT_EQ(found[0].layer, "scores");

  // One call outside a mask makes the layer's Infs count, for good.
  ASSERT_TRUE(agg.AddForward(mask, s).ok());
  ASSERT_TRUE(agg.AddForward(mask, m).ok());
  EXPECT_FALSE(agg.Snapshot().layers[0].inf_in_masks_only);

  // A keeper that skips tensors passes the same fact.
  TraceAggregator daemon;
  const auto id = *daemon.DeclareLayer({"mask", "MaskMaker", "mask", 1, 0});
  ForwardSample omitted;
  omitted.tensors_omitted = true;
  omitted.outputs_had_inf = true;
  omitted.outputs_inf_in_masks_only = true;
  ASSERT_TRUE(daemon.AddForward(id, omitted).ok());
  EXPECT_TRUE(daemon.Snapshot().layers[0].inf_in_masks_only);
}

TEST(NonFiniteRecord, FactsAndTheBackwardOriginRoundTripThroughJson) {
  TraceRecord r;
  LayerTrace l;
  l.name = l.full_name = "mask";
  l.type = "MaskMaker";
  l.forward_count = 1;
  l.has_inf = true;
  l.inf_in_masks_only = true;
  TensorInfo with_stats = kCausalMask;
  with_stats.nonfinite.reset();
  with_stats.stats = TensorStats{.mean = 0.0,
                                 .std = 0.0,
                                 .min = 0.0,
                                 .max = 0.0,
                                 .nan_count = 0,
                                 .inf_count = 6,
                                 .neg_inf_count = 6,
                                 .finite_all_zero = true};
  l.outputs = {with_stats, kMaskedScores};
  r.layers.push_back(l);
  NanOrigin origin{"blocks.1.mlp", 4, true};
  origin.backward = true;
  r.metadata.nan_origin = origin;
  const std::string json = TraceToJson(r);
  EXPECT_NE(json.find("\"inf_in_masks_only\": true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"pass\": \"backward\""), std::string::npos) << json;
  absl::StatusOr<TraceRecord> back = ParseTraceJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->layers[0], l);
  EXPECT_EQ(*back->metadata.nan_origin, origin);
  // A healthy tensor's entry is what it was: no new keys.
  TraceRecord plain;
  LayerTrace p = l;
  p.has_inf = false;
  p.inf_in_masks_only = false;
  p.outputs = {kFinite};
  plain.layers = {p};
  const std::string plain_json = TraceToJson(plain);
  EXPECT_EQ(plain_json.find("neg_inf_count"), std::string::npos);
  EXPECT_EQ(plain_json.find("finite_all_zero"), std::string::npos);
  EXPECT_EQ(plain_json.find("inf_in_masks_only"), std::string::npos);
}

TEST(NonFiniteRecord, BackwardOriginFinding) {
  TraceRecord r;
  LayerTrace l;
  l.name = l.full_name = "blocks.1.mlp";
  l.type = "MLP";
  l.forward_count = 1;
  l.outputs = {kFinite};
  r.layers.push_back(l);
  NanOrigin origin{"blocks.1.mlp", 4, true};
  origin.backward = true;
  origin.op = "log_1_3";
  origin.op_func = "log";
  origin.op_module = "blocks.1.mlp";
  r.metadata.nan_origin = origin;
  const std::vector<Anomaly> found = *DetectAnomalies(r);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, AnomalyType::kNanGradient);
  EXPECT_EQ(found[0].message,
            "NaN first appeared in the backward of blocks.1.mlp at step 4 (its output gradient "
            "was finite); no downstream layers affected");
  EXPECT_EQ(std::get<std::string>(*FindDetail(found[0].details, "op")), "log_1_3");
  EXPECT_EQ(std::get<std::string>(*FindDetail(found[0].details, "pass")), "backward");
}

}  // namespace
}  // namespace tracetorch
