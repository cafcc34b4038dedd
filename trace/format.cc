#include "trace/format.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tracetorch {

std::string FormatCount(int64_t n) {
  // Same thresholds as tracetorch-ml: one decimal from a thousand up, the integer below.
  const double v = static_cast<double>(n);
  const double mag = std::fabs(v);
  if (mag >= 1e9) return absl::StrFormat("%.1fB", v / 1e9);
  if (mag >= 1e6) return absl::StrFormat("%.1fM", v / 1e6);
  if (mag >= 1e3) return absl::StrFormat("%.1fK", v / 1e3);
  return absl::StrCat(n);
}

std::string FormatMs(double ms) {
  if (!std::isfinite(ms)) return "n/a";
  const double mag = std::fabs(ms);
  int decimals = 0;
  if (mag < 1) {
    decimals = 3;
  } else if (mag < 10) {
    decimals = 2;
  } else if (mag < 100) {
    decimals = 1;
  }
  return absl::StrFormat("%.*fms", decimals, ms);
}

std::string FormatShape(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    absl::StrAppend(&out, shape[i]);
  }
  out += ']';
  return out;
}

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  // Work with the unsigned magnitude so that INT64_MIN does not overflow.
  const uint64_t mag = bytes < 0 ? 0 - static_cast<uint64_t>(bytes) : static_cast<uint64_t>(bytes);
  if (mag < 1024) return absl::StrCat(bytes, "B");
  double scaled = static_cast<double>(mag) / 1024.0;
  size_t unit = 0;
  while (scaled >= 1024.0 && unit + 1 < std::size(kUnits)) {
    scaled /= 1024.0;
    ++unit;
  }
  // As tracetorch-ml: one decimal for KiB, two from MiB up.
  return absl::StrFormat("%s%.*f%s", bytes < 0 ? "-" : "", unit == 0 ? 1 : 2, scaled, kUnits[unit]);
}

std::string FormatPercent(double relative) {
  if (std::isnan(relative)) return "nan%";
  return absl::StrFormat("%+.1f%%", relative * 100.0);
}

std::string FormatFixed(double value, int decimals) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (decimals < 0) decimals = 0;
  return absl::StrFormat("%.*f", decimals, value);
}

}  // namespace tracetorch
