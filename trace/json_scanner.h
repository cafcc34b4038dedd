// Internal to trace/ (not installed; include json.h): the tolerant JSON scanner behind
// ParseTraceJson's slow path.
//
// simdjson parses standard JSON only. Python's json module also writes the tokens `NaN`,
// `Infinity` and `-Infinity`, integers beyond 64 bits and strings with lone UTF-16 surrogates
// ("\ud800"). When simdjson rejects a document, ScanJson checks it with a grammar that accepts
// those too, and either says exactly where it is wrong or returns the edits that turn it into a
// document simdjson accepts:
//   NaN, Infinity, -Infinity     -> the sentinel strings below (a real JSON string cannot hold a
//                                   raw NUL, so the sentinels are escaped "\u0000...")
//   a number beyond double range -> the Infinity / -Infinity sentinel
//   an integer beyond 64 bits    -> the same value as a double ("1.8446744073709552e+19")
//   a lone surrogate escape      -> "\ufffd"
// The record reader maps the sentinels back to numbers with DecodeSentinel, and only for a
// document that was rewritten.
//
// Example:
//   absl::StatusOr<std::vector<JsonEdit>> edits = ScanJson(text);
//   if (!edits.ok()) return edits.status();  // "line 3, column 17: expected ',' or ']'"
//   std::string fixed = ApplyEdits(text, *edits, /*padding=*/64);
//
// Thread-compatible: no shared state. Never reads outside `text` (no padding needed).
#ifndef TRACETORCH_TRACE_JSON_SCANNER_H_
#define TRACETORCH_TRACE_JSON_SCANNER_H_

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tracetorch {
namespace json_internal {

// The JSON text that replaces each non-finite token.
inline constexpr std::string_view kNanSentinel = "\"\\u0000NaN\"";
inline constexpr std::string_view kInfSentinel = "\"\\u0000Infinity\"";
inline constexpr std::string_view kNegInfSentinel = "\"\\u0000-Infinity\"";

// The deepest nesting of arrays and objects ScanJson accepts: simdjson's default maximum.
inline constexpr int kMaxJsonDepth = 1024;

// Replace text[offset, offset + length) by `replacement`.
struct JsonEdit {
  size_t offset;
  size_t length;
  std::string replacement;
};

// Scans the whole of `text` as one JSON value, with the tolerances above. Returns the edits to
// make, in increasing offset order and not overlapping (none when `text` is standard JSON that
// simdjson can hold). InvalidArgument when `text` is not JSON even so, with a message
// "line L, column C: <problem>"; lines and columns start at 1 and columns count characters (UTF-8
// sequences), not bytes. Problems include "unexpected end of input", "unterminated string",
// "invalid UTF-8 in string", "nesting too deep" and "unexpected content after the end of the
// document". Whitespace-only input is "unexpected end of input".
absl::StatusOr<std::vector<JsonEdit>> ScanJson(std::string_view text);

// Returns `text` with `edits` (as ScanJson returns them) applied, with room for `padding` more
// bytes reserved past the end (so that simdjson can parse it without a copy).
std::string ApplyEdits(std::string_view text, const std::vector<JsonEdit>& edits,
                       size_t padding = 0);

// When `s`, the decoded value of a JSON string, is one of the sentinels, stores its number in
// `*out` and returns true. Only meaningful for a document ApplyEdits rewrote: in any other the
// same string is just a string.
inline bool DecodeSentinel(std::string_view s, double* out) {
  if (s.empty() || s[0] != '\0') return false;
  if (s == std::string_view("\0NaN", 4)) {
    *out = std::numeric_limits<double>::quiet_NaN();
  } else if (s == std::string_view("\0Infinity", 9)) {
    *out = std::numeric_limits<double>::infinity();
  } else if (s == std::string_view("\0-Infinity", 10)) {
    *out = -std::numeric_limits<double>::infinity();
  } else {
    return false;
  }
  return true;
}

}  // namespace json_internal
}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_JSON_SCANNER_H_
