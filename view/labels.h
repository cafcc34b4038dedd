// Names, colours and marks that several `tracetorch` views share, so that a timestamp or an
// anomaly severity reads the same in every command: `sessions`, `watch --remote` (text and JSON),
// `inspect`, `summary` and `diff`. No protobuf types: the daemon's session states are named by
// session_labels.h.
//
// Thread-compatible; pure functions.
#ifndef TRACETORCH_VIEW_LABELS_H_
#define TRACETORCH_VIEW_LABELS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "trace/anomaly.h"
#include "view/text.h"

namespace tracetorch::view {

// A timestamp as listings print it, in UTC: "2026-01-01T12:00:00Z"; "-" when `unix_ns` <= 0
// (unknown).
std::string FormatUnixTime(int64_t unix_ns);

// Red for critical, yellow for warning, blue for info.
Color SeverityColor(AnomalySeverity severity);

// The rich symbol of a severity: "✗" critical, "⚠" warning, "ℹ" info.
std::string_view SeveritySymbol(AnomalySeverity severity);

// The mark after a layer: "✓" / "[ok]" (green) when `worst` is empty, else the symbol of `worst`
// (rich) or "[warning]" (plain), in its colour.
std::string SeverityMark(std::optional<AnomalySeverity> worst, const Style& style);

// The worst severity among `anomalies` per layer (Anomaly::layer), for marking a whole tree.
absl::flat_hash_map<std::string, AnomalySeverity> WorstSeverityByLayer(
    const std::vector<Anomaly>& anomalies);

}  // namespace tracetorch::view

#endif  // TRACETORCH_VIEW_LABELS_H_
