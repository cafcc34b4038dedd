#include "trace/json_scanner.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "trace/json_writer.h"

namespace tracetorch {
namespace json_internal {
namespace {

struct ScanResult {
  bool ok = true;
  size_t error_offset = 0;
  std::string error;
  std::vector<JsonEdit> edits;  // Tolerated non-standard input, to rewrite before parsing again.
};

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  ScanResult Run() {
    enum class State { kValue, kAfterValue, kKey };
    State state = State::kValue;
    std::vector<char> stack;
    while (true) {
      SkipWhitespace();
      if (state == State::kValue) {
        if (AtEnd()) return Fail(pos_, "unexpected end of input");
        const char c = text_[pos_];
        if (c == '{' || c == '[') {
          if (stack.size() >= kMaxJsonDepth) return Fail(pos_, "nesting too deep");
          stack.push_back(c);
          ++pos_;
          SkipWhitespace();
          if (!AtEnd() && text_[pos_] == (c == '{' ? '}' : ']')) {
            ++pos_;
            stack.pop_back();
            state = State::kAfterValue;
          } else {
            state = c == '{' ? State::kKey : State::kValue;
          }
          continue;
        }
        if (!ScanScalar()) return std::move(result_);
        state = State::kAfterValue;
        continue;
      }
      if (state == State::kKey) {
        if (AtEnd()) return Fail(pos_, "unexpected end of input");
        if (text_[pos_] != '"') return Fail(pos_, "expected a string key in double quotes");
        if (!ScanString()) return std::move(result_);
        SkipWhitespace();
        if (AtEnd()) return Fail(pos_, "unexpected end of input");
        if (text_[pos_] != ':') return Fail(pos_, "expected ':' after an object key");
        ++pos_;
        state = State::kValue;
        continue;
      }
      // kAfterValue
      if (stack.empty()) {
        if (!AtEnd()) return Fail(pos_, "unexpected content after the end of the document");
        return std::move(result_);
      }
      if (AtEnd()) return Fail(pos_, "unexpected end of input");
      const char c = text_[pos_];
      const char top = stack.back();
      if (c == ',') {
        ++pos_;
        state = top == '{' ? State::kKey : State::kValue;
      } else if (c == (top == '{' ? '}' : ']')) {
        ++pos_;
        stack.pop_back();
      } else {
        return Fail(pos_, top == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
      }
    }
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  void SkipWhitespace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
      ++pos_;
    }
  }
  ScanResult Fail(size_t offset, std::string message) {
    result_.ok = false;
    result_.error_offset = offset;
    result_.error = std::move(message);
    return std::move(result_);
  }
  bool SetError(size_t offset, std::string message) {
    result_.ok = false;
    result_.error_offset = offset;
    result_.error = std::move(message);
    return false;
  }
  bool Match(std::string_view token) const { return text_.substr(pos_, token.size()) == token; }

  bool ScanScalar() {
    const char c = text_[pos_];
    if (c == '"') return ScanString();
    if (Match("true")) {
      pos_ += 4;
      return true;
    }
    if (Match("false")) {
      pos_ += 5;
      return true;
    }
    if (Match("null")) {
      pos_ += 4;
      return true;
    }
    if (Match("NaN")) {
      result_.edits.push_back({pos_, 3, std::string(kNanSentinel)});
      pos_ += 3;
      return true;
    }
    if (Match("Infinity")) {
      result_.edits.push_back({pos_, 8, std::string(kInfSentinel)});
      pos_ += 8;
      return true;
    }
    if (Match("-Infinity")) {
      result_.edits.push_back({pos_, 9, std::string(kNegInfSentinel)});
      pos_ += 9;
      return true;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return ScanNumber();
    if (c >= 0x20 && c < 0x7F)
      return SetError(pos_, absl::StrCat("unexpected character '", std::string(1, c), "'"));
    const auto byte = static_cast<unsigned char>(c);
    return SetError(pos_, absl::StrCat("unexpected byte 0x", absl::Hex(byte, absl::kZeroPad2)));
  }

  bool ScanNumber() {
    const size_t start = pos_;
    const auto digit = [this] { return !AtEnd() && text_[pos_] >= '0' && text_[pos_] <= '9'; };
    if (text_[pos_] == '-') ++pos_;
    if (!digit()) return SetError(pos_, "invalid number: expected a digit");
    if (text_[pos_] == '0') {
      ++pos_;
      if (digit()) return SetError(pos_, "invalid number: leading zero");
    } else {
      while (digit()) ++pos_;
    }
    bool integer = true;
    if (!AtEnd() && text_[pos_] == '.') {
      integer = false;
      ++pos_;
      if (!digit()) return SetError(pos_, "invalid number: expected a digit after '.'");
      while (digit()) ++pos_;
    }
    if (!AtEnd() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integer = false;
      ++pos_;
      if (!AtEnd() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digit()) return SetError(pos_, "invalid number: expected a digit in the exponent");
      while (digit()) ++pos_;
    }
    // Valid JSON numbers simdjson cannot hold: integers beyond 64 bits and doubles beyond the
    // double range. Python reads them (as big ints and as inf); so do we, as doubles.
    const std::string_view token = text_.substr(start, pos_ - start);
    if (integer) {
      if (token[0] == '-') {
        int64_t v;
        if (std::from_chars(token.data(), token.data() + token.size(), v).ec == std::errc()) {
          return true;
        }
      } else {
        uint64_t v;
        if (std::from_chars(token.data(), token.data() + token.size(), v).ec == std::errc()) {
          return true;
        }
      }
    }
    const std::string copy(token);
    const double v = std::strtod(copy.c_str(), nullptr);
    if (std::isinf(v)) {
      result_.edits.push_back(
          {start, token.size(), std::string(v > 0 ? kInfSentinel : kNegInfSentinel)});
    } else if (integer) {
      std::string as_double;
      AppendJsonDouble(v, &as_double);
      result_.edits.push_back({start, token.size(), std::move(as_double)});
    }
    return true;
  }

  static int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // Reads the 4 hex digits of a \u escape whose backslash is at `at`; -1 if malformed.
  int ReadEscapeUnit(size_t at) const {
    if (at + 6 > text_.size() || text_[at] != '\\' || text_[at + 1] != 'u') return -1;
    int unit = 0;
    for (size_t k = at + 2; k < at + 6; ++k) {
      const int h = HexValue(text_[k]);
      if (h < 0) return -1;
      unit = unit * 16 + h;
    }
    return unit;
  }

  bool ScanString() {
    const size_t start = pos_++;
    while (true) {
      if (AtEnd()) return SetError(start, "unterminated string");
      const auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return SetError(pos_, "unescaped control character in string");
      if (c == '\\') {
        if (pos_ + 1 >= text_.size()) return SetError(start, "unterminated string");
        const char e = text_[pos_ + 1];
        if (e == 'u') {
          const int unit = ReadEscapeUnit(pos_);
          if (unit < 0) return SetError(pos_, "invalid \\u escape: expected 4 hex digits");
          if (unit >= 0xD800 && unit <= 0xDBFF) {
            const int low = ReadEscapeUnit(pos_ + 6);
            if (low >= 0xDC00 && low <= 0xDFFF) {
              pos_ += 12;
              continue;
            }
          }
          if (unit >= 0xD800 && unit <= 0xDFFF) {
            // A lone surrogate: Python keeps it, UTF-8 cannot; read it as U+FFFD.
            result_.edits.push_back({pos_, 6, "\\ufffd"});
          }
          pos_ += 6;
          continue;
        }
        if (std::strchr("\"\\/bfnrt", e) == nullptr || e == '\0') {
          return SetError(pos_, "invalid escape sequence in string");
        }
        pos_ += 2;
        continue;
      }
      if (c < 0x80) {
        ++pos_;
        continue;
      }
      uint32_t cp;
      const size_t len = DecodeUtf8(text_, pos_, &cp);
      if (len == 0) return SetError(pos_, "invalid UTF-8 in string");
      pos_ += len;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  ScanResult result_;
};

// "line 3, column 17" for a byte offset; columns count characters, both start at 1.
std::string LineColumn(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  int64_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  int64_t column = 1;
  for (size_t i = line_start; i < offset; ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++column;
  }
  return absl::StrCat("line ", line, ", column ", column);
}

}  // namespace

absl::StatusOr<std::vector<JsonEdit>> ScanJson(std::string_view text) {
  ScanResult scan = Scanner(text).Run();
  if (!scan.ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(LineColumn(text, scan.error_offset), ": ", scan.error));
  }
  return std::move(scan.edits);
}

std::string ApplyEdits(std::string_view text, const std::vector<JsonEdit>& edits, size_t padding) {
  std::string out;
  out.reserve(text.size() + edits.size() * 16 + padding);
  size_t at = 0;
  for (const JsonEdit& e : edits) {
    out.append(text.substr(at, e.offset - at));
    out.append(e.replacement);
    at = e.offset + e.length;
  }
  out.append(text.substr(at));
  return out;
}

}  // namespace json_internal
}  // namespace tracetorch
