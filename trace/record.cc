#include "trace/record.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trace/op_graph.h"

namespace tracetorch {
namespace {

constexpr std::array<std::pair<AnomalySeverity, std::string_view>, 3> kSeverityNames = {{
    {AnomalySeverity::kInfo, "info"},
    {AnomalySeverity::kWarning, "warning"},
    {AnomalySeverity::kCritical, "critical"},
}};

constexpr std::array<std::pair<AnomalyType, std::string_view>, 9> kTypeNames = {{
    {AnomalyType::kNanActivation, "nan_activation"},
    {AnomalyType::kInfActivation, "inf_activation"},
    {AnomalyType::kDeadLayer, "dead_layer"},
    {AnomalyType::kExplodingVariance, "exploding_variance"},
    {AnomalyType::kHighVariance, "high_variance"},
    {AnomalyType::kEmptyOutput, "empty_output"},
    {AnomalyType::kZeroGradient, "zero_gradient"},
    {AnomalyType::kNanGradient, "nan_gradient"},
    {AnomalyType::kRankDivergence, "rank_divergence"},
}};

}  // namespace

// Declared in record.h without a body so that the header compiles as C++17; defaulted here.
bool operator==(const TensorStats&, const TensorStats&) = default;
bool operator==(const NonFiniteCounts&, const NonFiniteCounts&) = default;
bool operator==(const TensorInfo&, const TensorInfo&) = default;
bool operator==(const LayerTrace&, const LayerTrace&) = default;
bool operator==(const Anomaly&, const Anomaly&) = default;
bool operator==(const NanOrigin&, const NanOrigin&) = default;
bool operator==(const TraceMetadata&, const TraceMetadata&) = default;
bool operator==(const TraceRecord& a, const TraceRecord& b) {
  // By value, as the defaulted ones (a graph holding a NaN statistic never compares equal).
  // Keep in step with the members of TraceRecord.
  const bool same_graph = a.op_graph != nullptr && b.op_graph != nullptr
                              ? *a.op_graph == *b.op_graph
                              : a.op_graph == b.op_graph;
  return a.metadata == b.metadata && a.layers == b.layers && a.warnings == b.warnings && same_graph;
}

void TraceMetadata::SetExtra(std::string_view key, std::string json_value) {
  for (auto& [k, v] : extra) {
    if (k == key) {
      v = std::move(json_value);
      return;
    }
  }
  extra.emplace_back(std::string(key), std::move(json_value));
}

const std::string* TraceMetadata::FindExtra(std::string_view key) const {
  for (const auto& [k, v] : extra) {
    if (k == key) return &v;
  }
  return nullptr;
}

int64_t NanCount(const TensorInfo& t) {
  if (t.stats.has_value()) return t.stats->nan_count;
  return t.nonfinite.has_value() ? t.nonfinite->nan_count : 0;
}

int64_t InfCount(const TensorInfo& t) {
  if (t.stats.has_value()) return t.stats->inf_count;
  return t.nonfinite.has_value() ? t.nonfinite->inf_count : 0;
}

int64_t NegInfCount(const TensorInfo& t) {
  if (t.stats.has_value()) return t.stats->neg_inf_count;
  return t.nonfinite.has_value() ? t.nonfinite->neg_inf_count : 0;
}

bool FiniteAllZero(const TensorInfo& t) {
  if (t.stats.has_value()) return t.stats->finite_all_zero;
  return t.nonfinite.has_value() && t.nonfinite->finite_all_zero;
}

const DetailValue* FindDetail(const Details& details, std::string_view key) {
  for (const auto& [k, v] : details) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string_view ToString(AnomalySeverity severity) {
  for (const auto& [value, name] : kSeverityNames) {
    if (value == severity) return name;
  }
  return "unknown";
}

std::string_view ToString(AnomalyType type) {
  for (const auto& [value, name] : kTypeNames) {
    if (value == type) return name;
  }
  return "unknown";
}

std::string_view TypeName(const Anomaly& anomaly) {
  if (anomaly.type == AnomalyType::kUnknown) return anomaly.unknown_type;
  return ToString(anomaly.type);
}

bool ParseAnomalySeverity(std::string_view text, AnomalySeverity* out) {
  for (const auto& [value, name] : kSeverityNames) {
    if (name == text) {
      *out = value;
      return true;
    }
  }
  return false;
}

bool ParseAnomalyType(std::string_view text, AnomalyType* out) {
  for (const auto& [value, name] : kTypeNames) {
    if (name == text) {
      *out = value;
      return true;
    }
  }
  return false;
}

const LayerTrace* TraceRecord::FindLayer(std::string_view full_name) const {
  for (const LayerTrace& layer : layers) {
    if (layer.full_name == full_name) return &layer;
  }
  return nullptr;
}

std::vector<std::string> UnknownAnomalyTypes(const TraceRecord& record) {
  std::vector<std::string> types;
  for (const Anomaly& a : record.warnings) {
    if (a.type != AnomalyType::kUnknown) continue;
    if (std::find(types.begin(), types.end(), a.unknown_type) == types.end()) {
      types.push_back(a.unknown_type);
    }
  }
  return types;
}

std::string DescribeUnknownAnomalyTypes(const TraceRecord& record) {
  const std::vector<std::string> types = UnknownAnomalyTypes(record);
  if (types.empty()) return "";
  std::string out = "warnings of unknown type kept as they are:";
  for (size_t i = 0; i < types.size(); ++i) {
    out.append(i == 0 ? " \"" : ", \"").append(types[i]).append("\"");
  }
  return out;
}

}  // namespace tracetorch
