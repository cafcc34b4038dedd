#include "trace/op_audit.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "trace/json_writer.h"
#include "trace/nonfinite.h"

namespace tracetorch {
namespace {

AuditedOp Describe(const OpGraph& g, int32_t i) {
  const OpNode& op = g.ops[i];
  AuditedOp a;
  a.op = i;
  a.label = op.label;
  a.func = op.func_name;
  a.module = op.module_pass >= 0 ? g.ModuleAddress(op.module_pass) : "";
  for (const TensorInfo& t : op.outputs) {
    a.nan_count += NanCount(t);
    a.inf_count += InfCount(t);
  }
  return a;
}

bool AllZero(const OpNode& op) {
  if (!op.tensor_output || op.outputs.empty()) return false;
  const std::optional<TensorStats>& s = op.outputs[0].stats;
  return s && s->min && s->max && *s->min == 0 && *s->max == 0;
}

void WriteOp(const AuditedOp& a, JsonWriter& w) {
  w.BeginObject();
  w.PlainKey("op");
  w.Int(a.op);
  w.PlainKey("label");
  w.String(a.label);
  w.PlainKey("func");
  w.String(a.func);
  w.PlainKey("module");
  w.String(a.module);
  w.PlainKey("nan_count");
  w.Int(a.nan_count);
  w.PlainKey("inf_count");
  w.Int(a.inf_count);
  w.PlainKey("zero_fraction");
  w.Double(a.zero_fraction);
  w.PlainKey("after");
  w.String(a.after);
  w.EndObject();
}

// Why no origin was named: nothing non-finite, or only masks and values that were absorbed.
std::string NoneReason(int32_t nonfinite_ops) {
  if (nonfinite_ops == 0) return "every output finite";
  return absl::StrCat(nonfinite_ops, nonfinite_ops == 1 ? " op" : " ops",
                      " held only masks or -inf that was absorbed");
}

std::string Where(const AuditedOp& a) {
  return a.module.empty() ? a.label : absl::StrCat(a.label, " in ", a.module);
}

}  // namespace

bool IsActivation(std::string_view func_name) {
  std::string_view f = func_name;
  if (f.size() > 1 && f.back() == '_') f.remove_suffix(1);
  static constexpr std::array<std::string_view, 13> kActivations = {
      "relu",     "relu6",     "leaky_relu", "gelu",     "silu", "elu",  "selu",
      "hardtanh", "hardswish", "threshold",  "softplus", "mish", "prelu"};
  return std::find(kActivations.begin(), kActivations.end(), f) != kActivations.end();
}

OpAuditReport AuditOpGraph(const OpGraph& g) {
  OpAuditReport r;
  r.model_name = g.model_name;
  r.ops = static_cast<int32_t>(g.ops.size());
  // The rule of trace/nonfinite.h, from the statistics (not the graph's own nan_origin field, which
  // a file written by an older version decided by another rule).
  const OpTrouble trouble = FindOpTrouble(g);
  if (trouble.input) r.nan_input = g.inputs[static_cast<size_t>(*trouble.input)].name;
  if (trouble.origin) r.nan_origin = Describe(g, *trouble.origin);
  r.nonfinite_ops = trouble.nonfinite_ops;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const OpNode& op = g.ops[i];
    if (!op.outputs.empty() && op.outputs[0].stats) ++r.ops_with_stats;
    if (!AllZero(op)) continue;
    std::string after;
    if (IsActivation(op.func_name)) {
      after = op.label;
    } else {
      for (int32_t p : op.parents) {
        if (IsActivation(g.ops[p].func_name)) {
          after = g.ops[p].label;
          break;
        }
      }
    }
    if (after.empty()) continue;
    AuditedOp a = Describe(g, static_cast<int32_t>(i));
    a.zero_fraction = 1.0;
    a.after = after;
    r.dead.push_back(std::move(a));
  }
  return r;
}

std::string OpAuditToJson(const OpAuditReport& r, int indent) {
  std::string out;
  JsonWriter w(indent, &out);
  w.BeginObject();
  w.PlainKey("model_name");
  w.String(r.model_name);
  w.PlainKey("ops");
  w.Int(r.ops);
  w.PlainKey("ops_with_stats");
  w.Int(r.ops_with_stats);
  w.PlainKey("nan_origin");
  if (r.nan_origin) {
    WriteOp(*r.nan_origin, w);
  } else {
    w.Null();
  }
  w.PlainKey("nan_input");
  if (r.nan_input.empty()) {
    w.Null();
  } else {
    w.String(r.nan_input);
  }
  w.PlainKey("nonfinite_ops");
  w.Int(r.nonfinite_ops);
  w.PlainKey("dead");
  w.BeginArray();
  for (const AuditedOp& a : r.dead) WriteOp(a, w);
  w.EndArray();
  w.EndObject();
  w.Finish();
  return out;
}

std::string RenderOpAudit(const OpAuditReport& r) {
  std::string out = absl::StrCat("Audit of ", r.model_name.empty() ? "model" : r.model_name, ": ",
                                 r.ops, " ops, ", r.ops_with_stats, " with statistics\n");
  if (r.nan_origin) {
    absl::StrAppend(&out, "  non-finite origin  ", Where(*r.nan_origin), " (", r.nan_origin->func,
                    "): NaN ", r.nan_origin->nan_count, ", Inf ", r.nan_origin->inf_count, "; ",
                    r.nonfinite_ops, " ops non-finite\n");
  } else if (!r.nan_input.empty()) {
    absl::StrAppend(&out, "  non-finite origin  the input ", r.nan_input, " (", r.nonfinite_ops,
                    " ops non-finite)\n");
  } else {
    absl::StrAppend(&out, "  non-finite origin  none (", NoneReason(r.nonfinite_ops), ")\n");
  }
  if (r.dead.empty()) {
    absl::StrAppend(&out, "  dead outputs       none\n");
    return out;
  }
  absl::StrAppend(&out, "  dead outputs       ", r.dead.size(), "\n");
  size_t width = 2;
  for (const AuditedOp& a : r.dead) width = std::max(width, Where(a).size());
  for (const AuditedOp& a : r.dead) {
    absl::StrAppend(&out, "    ", Where(a), std::string(width - Where(a).size() + 2, ' '),
                    absl::StrFormat("%5.1f%% zero", 100 * a.zero_fraction),
                    a.after == a.label ? "" : absl::StrCat("  (after ", a.after, ")"), "\n");
  }
  return out;
}

}  // namespace tracetorch
