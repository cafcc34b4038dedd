// The trace data model: what one traced run of a model records, per layer.
//
// The layout mirrors the JSON written by the tracetorch-ml Python library (see json.h for the exact
// mapping), so that traces written by either tool can be read, diffed and rendered by the other.
//
// Conventions:
//  - A value that was not measured is std::nullopt (JSON `null`), never 0.
//  - A non-finite measured value (a NaN mean, say) is kept as the double itself in memory; the
//    writer turns it into `null` and the NaN/Inf flags carry the fact.
//  - Plain structs with value semantics; not synchronised. Copy freely.
//  - == and != compare member by member (doubles with ==, so a NaN member never compares equal).
//    record.cc defaults them, so that this header, installed for find_package(tracetorch), stays
//    C++17 (libtorch programs build with CMAKE_CXX_STANDARD 17).
#ifndef TRACETORCH_TRACE_RECORD_H_
#define TRACETORCH_TRACE_RECORD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tracetorch {

struct OpGraph;  // trace/op_graph.h (which includes this header for TensorInfo).

// Statistics of one tensor. mean/std/min/max are computed over finite elements only (population
// std); they are nullopt for non-float and empty tensors. nan_count/inf_count cover every element.
//
// neg_inf_count and finite_all_zero are the facts trace/nonfinite.h needs to tell a mask from
// trouble; they are measured only for a tensor that holds a NaN or an Inf (0 and false otherwise).
// A reader of a file or a stream without them (tracetorch-ml, an older agent) keeps 0 and false:
// every Inf then counts as an Inf outside a mask, the meaning such files always had.
struct TensorStats {
  std::optional<double> mean;
  std::optional<double> std;
  std::optional<double> min;
  std::optional<double> max;
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  int64_t neg_inf_count = 0;     // How many of the inf_count values are -Inf.
  bool finite_all_zero = false;  // Every finite element is 0 (or there is none).

  friend bool operator==(const TensorStats&, const TensorStats&);
  friend bool operator!=(const TensorStats& a, const TensorStats& b) { return !(a == b); }
};

// NaN and +/-Inf counts of a tensor whose statistics were not captured (capture_stats=False): the
// NaN checks keep working without the cost of the moments.
struct NonFiniteCounts {
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  int64_t neg_inf_count = 0;     // As in TensorStats.
  bool finite_all_zero = false;  // As in TensorStats.

  friend bool operator==(const NonFiniteCounts&, const NonFiniteCounts&);
};

// One input or output tensor of a layer call.
struct TensorInfo {
  std::vector<int64_t> shape;
  std::string dtype;   // As torch prints it: "torch.float32".
  std::string device;  // "cpu", "cuda:0".
  // Absent when statistics were not captured for this tensor (JSON: the stat keys are missing).
  std::optional<TensorStats> stats;
  // Set only when `stats` is absent but the NaN/Inf counts were measured (JSON: "nonfinite":
  // {"nan_count", "inf_count"}, a key the Python library ignores). Use NanCount()/InfCount().
  std::optional<NonFiniteCounts> nonfinite = std::nullopt;

  friend bool operator==(const TensorInfo&, const TensorInfo&);
  friend bool operator!=(const TensorInfo& a, const TensorInfo& b) { return !(a == b); }
};

// The NaN (Inf) count of `t`, from its statistics or from its counts without statistics; 0 when
// neither was measured. NegInfCount and FiniteAllZero likewise (0 / false).
int64_t NanCount(const TensorInfo& t);
int64_t InfCount(const TensorInfo& t);
int64_t NegInfCount(const TensorInfo& t);
bool FiniteAllZero(const TensorInfo& t);

// Everything recorded for one module (layer), aggregated over all its calls.
struct LayerTrace {
  std::string name;       // Last component of the module path ("fc").
  std::string type;       // Class name ("Linear").
  std::string full_name;  // Dotted module path ("blocks.0.fc"); unique within a record.
  int32_t depth = 0;      // Number of components in full_name.
  int64_t params = 0;     // Direct parameters only.

  // Tensors of the latest call.
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;

  // Forward latency: latest call, and min/max/mean over forward_count calls.
  std::optional<double> latency_ms;
  std::optional<double> latency_ms_min;
  std::optional<double> latency_ms_max;
  std::optional<double> latency_ms_mean;
  int64_t forward_count = 0;
  bool has_nan = false;  // Sticky: any output ever held NaN.
  bool has_inf = false;  // Sticky: any output ever held +/-Inf.
  // With has_inf: every Inf an output of this layer ever held was inside a mask
  // (trace/nonfinite.h), so it is no anomaly. False when any was not, and in files that do not say
  // (tracetorch-ml). JSON: "inf_in_masks_only": true after "has_inf", written only when true.
  bool inf_in_masks_only = false;

  // Gradient with respect to the layer's (first) output, latest backward.
  std::optional<double> grad_norm;
  std::optional<double> grad_mean;
  bool grad_has_nan = false;   // Sticky.
  bool has_zero_grad = false;  // Sticky: an output gradient was all zeros.
  // Gradient with respect to the layer's (first) input, latest backward.
  std::optional<double> grad_in_norm;
  std::optional<double> grad_in_mean;
  bool grad_in_has_nan = false;  // Sticky.

  std::optional<double> bwd_latency_ms;
  std::optional<double> bwd_latency_ms_min;
  std::optional<double> bwd_latency_ms_max;
  std::optional<double> bwd_latency_ms_mean;
  int64_t backward_count = 0;

  // CUDA caching-allocator deltas in bytes over the latest call; nullopt on CPU.
  std::optional<int64_t> fwd_mem_alloc_delta;
  std::optional<int64_t> fwd_mem_reserved_delta;
  std::optional<int64_t> bwd_mem_alloc_delta;
  std::optional<int64_t> bwd_mem_reserved_delta;

  friend bool operator==(const LayerTrace&, const LayerTrace&);
  friend bool operator!=(const LayerTrace& a, const LayerTrace& b) { return !(a == b); }
};

// A value in an anomaly's or diff entry's `details` object.
using DetailValue =
    std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<std::string>>;
// Ordered key/value pairs: the JSON object keeps this order.
using Details = std::vector<std::pair<std::string, DetailValue>>;

// Returns the value for `key`, or nullptr.
const DetailValue* FindDetail(const Details& details, std::string_view key);

enum class AnomalySeverity { kInfo, kWarning, kCritical };
enum class AnomalyType {
  kNanActivation,
  kInfActivation,
  kDeadLayer,
  kExplodingVariance,
  kHighVariance,
  kEmptyOutput,
  kZeroGradient,
  kNanGradient,
  kRankDivergence,  // A rank of a job departs from the other ranks (trace/divergence.h).
  // A type this version does not know, read from a file (another tool or a newer version wrote
  // it): kept, with its spelling in Anomaly::unknown_type, and written back as it was. Never
  // produced by the checks.
  kUnknown,
};

// The JSON spellings: "info"/"warning"/"critical"; "nan_activation", "dead_layer", ...
// (kUnknown: "unknown"; an anomaly's own spelling is TypeName()).
std::string_view ToString(AnomalySeverity severity);
std::string_view ToString(AnomalyType type);
// Return false for an unknown spelling (the JSON reader then keeps the warning as kUnknown).
bool ParseAnomalySeverity(std::string_view text, AnomalySeverity* out);
bool ParseAnomalyType(std::string_view text, AnomalyType* out);

struct Anomaly {
  AnomalyType type = AnomalyType::kNanActivation;
  AnomalySeverity severity = AnomalySeverity::kInfo;
  std::string layer;  // full_name of the layer ("<input>" for the model input).
  std::string message;
  Details details;
  // The type as it was spelled, when `type` is kUnknown; empty otherwise.
  std::string unknown_type = "";

  friend bool operator==(const Anomaly&, const Anomaly&);
  friend bool operator!=(const Anomaly& a, const Anomaly& b) { return !(a == b); }
};

// The type's JSON spelling: unknown_type for kUnknown, ToString(type) otherwise.
std::string_view TypeName(const Anomaly& anomaly);

// Where non-finite trouble first appeared in a run (the rule is trace/nonfinite.h's): the model
// input, the first layer, in execution order, whose inputs carried no trouble and whose outputs
// did, the model's own code outside its layers, or, for trouble first born in the backward, the
// first layer whose output gradient was finite and whose input gradient was not (or the loss).
struct NanOrigin {
  static constexpr std::string_view kModelInput = "<input>";
  // The model's own forward code, outside any of its layers (the root module's inline ops).
  static constexpr std::string_view kModelCode = "<root>";
  // Backward only: the gradient held it before any layer's backward ran (the loss, or code of the
  // model's forward outside its layers).
  static constexpr std::string_view kLoss = "<loss>";
  std::string layer;   // full_name, or one of the names above.
  int64_t step = 0;    // 0-based forward pass (step) in which it appeared.
  bool is_nan = true;  // false: the first non-finite value was +/-Inf, not NaN.
  // It first appeared in the backward of that step (a gradient), not in its forward. JSON:
  // "pass": "backward" beside "kind", only when set.
  bool backward = false;
  // The operation where it entered, when the session recorded ops (TraceSession(ops="on_nan")):
  // the op's label ("log_1_12"), func_name ("log") and module address (OpGraph::ModuleAddress:
  // "layer1.0", "block:2", "<root>"). All empty otherwise, or when the value entered with the
  // model input. JSON: "op", "op_func", "op_module" beside "layer", only when `op` is set.
  std::string op = "";
  std::string op_func = "";
  std::string op_module = "";

  friend bool operator==(const NanOrigin&, const NanOrigin&);
  friend bool operator!=(const NanOrigin& a, const NanOrigin& b) { return !(a == b); }
};

struct TraceMetadata {
  std::string model_name;
  std::string pytorch_version;
  std::string python_version;
  std::string platform;
  bool cuda_available = false;
  std::string cuda_version = "N/A";
  std::string active_device = "cpu";
  std::optional<double> total_time_ms;
  std::optional<NanOrigin> nan_origin;  // JSON: "nan_origin": {"layer", "step", "kind"} when set.
  // Metadata keys this version does not model, kept in file order as minified JSON text, so that a
  // read-modify-write keeps them. Also where agents put counters (e.g. "dropped_events": 12).
  std::vector<std::pair<std::string, std::string>> extra;

  // Sets extra[key] to `json_value` (JSON text), replacing an existing entry in place, else
  // appending one.
  void SetExtra(std::string_view key, std::string json_value);
  // The JSON text of extra[key], or nullptr.
  const std::string* FindExtra(std::string_view key) const;

  friend bool operator==(const TraceMetadata&, const TraceMetadata&);
  friend bool operator!=(const TraceMetadata& a, const TraceMetadata& b) { return !(a == b); }
};

// One trace: layers in the order they first completed a forward pass (children before parents, as
// the Python library records them), and the anomalies found when the trace was finalised.
struct TraceRecord {
  TraceMetadata metadata;
  std::vector<LayerTrace> layers;
  std::vector<Anomaly> warnings;
  // The op graph of the step where the first non-finite value appeared, kept by a session that
  // recorded ops (TraceSession(ops="on_nan")); null when none was kept. Include trace/op_graph.h
  // to read it. Shared and immutable: copying a record (the daemon copies one per snapshot) does
  // not copy the graph; to change it, build a new OpGraph and point here. == compares the graphs,
  // not the pointers. JSON: the record's "op_graph" member (after "warnings"; absent when null),
  // whose value is the trace/op_graph_json.h document, minified; the wire carries that same text.
  std::shared_ptr<const OpGraph> op_graph;

  // Returns the layer with this full_name, or nullptr. Linear scan: for lookups in loops, build an
  // index (see diff.cc).
  const LayerTrace* FindLayer(std::string_view full_name) const;

  friend bool operator==(const TraceRecord&, const TraceRecord&);
  friend bool operator!=(const TraceRecord& a, const TraceRecord& b) { return !(a == b); }
};

// The distinct spellings of the record's warnings of AnomalyType::kUnknown, in order of first
// appearance (a file written by another tool or a newer version).
std::vector<std::string> UnknownAnomalyTypes(const TraceRecord& record);

// What a reader of `record` says about those warnings, one line without a trailing newline:
//   warnings of unknown type kept as they are: "test", "drift"
// Empty when there are none.
std::string DescribeUnknownAnomalyTypes(const TraceRecord& record);

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_RECORD_H_
