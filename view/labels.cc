#include "view/labels.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace tracetorch::view {

std::string FormatUnixTime(int64_t unix_ns) {
  if (unix_ns <= 0) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixNanos(unix_ns), absl::UTCTimeZone());
}

Color SeverityColor(AnomalySeverity severity) {
  switch (severity) {
    case AnomalySeverity::kCritical:
      return Color::kRed;
    case AnomalySeverity::kWarning:
      return Color::kYellow;
    case AnomalySeverity::kInfo:
      return Color::kBlue;
  }
  return Color::kBlue;
}

std::string_view SeveritySymbol(AnomalySeverity severity) {
  switch (severity) {
    case AnomalySeverity::kCritical:
      return "✗";
    case AnomalySeverity::kWarning:
      return "⚠";
    case AnomalySeverity::kInfo:
      return "ℹ";
  }
  return "?";
}

std::string SeverityMark(std::optional<AnomalySeverity> worst, const Style& style) {
  if (!worst.has_value()) return Paint(Glyph(style, "✓", "[ok]"), Color::kGreen, style);
  if (style.unicode) return Paint(SeveritySymbol(*worst), SeverityColor(*worst), style);
  return Paint(absl::StrCat("[", std::string(ToString(*worst)), "]"), SeverityColor(*worst), style);
}

absl::flat_hash_map<std::string, AnomalySeverity> WorstSeverityByLayer(
    const std::vector<Anomaly>& anomalies) {
  absl::flat_hash_map<std::string, AnomalySeverity> worst;
  for (const Anomaly& anomaly : anomalies) {
    auto [it, inserted] = worst.emplace(anomaly.layer, anomaly.severity);
    if (!inserted && static_cast<int>(anomaly.severity) > static_cast<int>(it->second)) {
      it->second = anomaly.severity;
    }
  }
  return worst;
}

}  // namespace tracetorch::view
