#include "trace/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "simdjson.h"
#include "trace/atomic_file.h"
#include "trace/diff.h"
#include "trace/json_writer.h"
#include "trace/record.h"

namespace tracetorch {
namespace {

// ---------------------------------------------------------------------------------------------
// Field names. The arrays are in the order the Python library writes them; the writer uses that
// order and the reader tries the next name in it first, so a file in canonical order costs one
// comparison per key.

enum LayerField {
  kName,
  kType,
  kFullName,
  kDepth,
  kParams,
  kInputs,
  kOutputs,
  kLatency,
  kLatencyMin,
  kLatencyMax,
  kLatencyMean,
  kForwardCount,
  kHasNan,
  kHasInf,
  kGradNorm,
  kGradMean,
  kGradHasNan,
  kHasZeroGrad,
  kGradInNorm,
  kGradInMean,
  kGradInHasNan,
  kBwdLatency,
  kBwdLatencyMin,
  kBwdLatencyMax,
  kBwdLatencyMean,
  kBackwardCount,
  kFwdMemAlloc,
  kFwdMemReserved,
  kBwdMemAlloc,
  kBwdMemReserved,
  kNumLayerFields,
};
constexpr std::string_view kLayerFields[kNumLayerFields] = {
    "name",
    "type",
    "full_name",
    "depth",
    "params",
    "inputs",
    "outputs",
    "latency_ms",
    "latency_ms_min",
    "latency_ms_max",
    "latency_ms_mean",
    "forward_count",
    "has_nan",
    "has_inf",
    "grad_norm",
    "grad_mean",
    "grad_has_nan",
    "has_zero_grad",
    "grad_in_norm",
    "grad_in_mean",
    "grad_in_has_nan",
    "bwd_latency_ms",
    "bwd_latency_ms_min",
    "bwd_latency_ms_max",
    "bwd_latency_ms_mean",
    "backward_count",
    "fwd_mem_alloc_delta",
    "fwd_mem_reserved_delta",
    "bwd_mem_alloc_delta",
    "bwd_mem_reserved_delta",
};

enum TensorField {
  kShape,
  kDtype,
  kDevice,
  kMean,
  kStd,
  kMin,
  kMax,
  kNanCount,
  kInfCount,
  kNonFinite,  // Ours: the counts of a tensor without statistics (TensorInfo::nonfinite).
  kNumTensorFields,
};
constexpr std::string_view kTensorFields[kNumTensorFields] = {
    "shape", "dtype", "device", "mean", "std", "min", "max", "nan_count", "inf_count", "nonfinite",
};

enum MetadataField {
  kModelName,
  kPytorchVersion,
  kPythonVersion,
  kPlatform,
  kCudaAvailable,
  kCudaVersion,
  kActiveDevice,
  kTotalTimeMs,
  kNanOrigin,
  kNumMetadataFields,
};
constexpr std::string_view kMetadataFields[kNumMetadataFields] = {
    "model_name",   "pytorch_version", "python_version", "platform",   "cuda_available",
    "cuda_version", "active_device",   "total_time_ms",  "nan_origin",
};

// Equality for short keys without a call to memcmp: 8-byte words, the last one overlapping.
inline bool SameKey(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  if (n < 8) {
    for (size_t i = 0; i < n; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }
  uint64_t x;
  uint64_t y;
  for (size_t i = 0; i + 8 < n; i += 8) {
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    if (x != y) return false;
  }
  std::memcpy(&x, a.data() + n - 8, 8);
  std::memcpy(&y, b.data() + n - 8, 8);
  return x == y;
}

template <size_t N>
int FindField(const std::string_view (&names)[N], std::string_view key, int guess) {
  if (guess >= 0 && static_cast<size_t>(guess) < N && SameKey(names[guess], key)) return guess;
  for (size_t i = 0; i < N; ++i) {
    if (SameKey(names[i], key)) return static_cast<int>(i);
  }
  return -1;
}

void WriteDetails(const Details& details, JsonWriter& w) {
  w.BeginObject();
  for (const auto& [key, value] : details) {
    w.Key(key);
    std::visit(
        [&w](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::monostate>) {
            w.Null();
          } else if constexpr (std::is_same_v<T, bool>) {
            w.Bool(v);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            w.Int(v);
          } else if constexpr (std::is_same_v<T, double>) {
            w.Double(v);
          } else if constexpr (std::is_same_v<T, std::string>) {
            w.String(v);
          } else {
            w.BeginArray();
            for (const std::string& s : v) w.String(s);
            w.EndArray();
          }
        },
        value);
  }
  w.EndObject();
}

void WriteTensor(const TensorInfo& t, JsonWriter& w) {
  w.BeginObject();
  w.PlainKey(kTensorFields[kShape]);
  w.BeginArray();
  for (int64_t d : t.shape) w.Int(d);
  w.EndArray();
  w.PlainKey(kTensorFields[kDtype]);
  w.String(t.dtype);
  w.PlainKey(kTensorFields[kDevice]);
  w.String(t.device);
  if (t.stats) {
    w.PlainKey(kTensorFields[kMean]);
    w.OptDouble(t.stats->mean);
    w.PlainKey(kTensorFields[kStd]);
    w.OptDouble(t.stats->std);
    w.PlainKey(kTensorFields[kMin]);
    w.OptDouble(t.stats->min);
    w.PlainKey(kTensorFields[kMax]);
    w.OptDouble(t.stats->max);
    w.PlainKey(kTensorFields[kNanCount]);
    w.Int(t.stats->nan_count);
    w.PlainKey(kTensorFields[kInfCount]);
    w.Int(t.stats->inf_count);
  } else if (t.nonfinite) {
    w.PlainKey(kTensorFields[kNonFinite]);
    w.BeginObject();
    w.PlainKey(kTensorFields[kNanCount]);
    w.Int(t.nonfinite->nan_count);
    w.PlainKey(kTensorFields[kInfCount]);
    w.Int(t.nonfinite->inf_count);
    w.EndObject();
  }
  w.EndObject();
}

// The library writes 0.0 for the latency of a layer that never ran that pass (a fresh layer, a
// forward without backward) and its own tools compare it with 0; so do we, for such a layer only.
// The reader turns it back into "not measured".
void WriteLatest(const std::optional<double>& latency, int64_t count, JsonWriter& w) {
  if (!latency.has_value() && count == 0) {
    w.Double(0.0);
  } else {
    w.OptDouble(latency);
  }
}

void WriteLayer(const LayerTrace& l, JsonWriter& w) {
  const auto key = [&w](LayerField f) { w.PlainKey(kLayerFields[f]); };
  w.BeginObject();
  key(kName);
  w.String(l.name);
  key(kType);
  w.String(l.type);
  key(kFullName);
  w.String(l.full_name);
  key(kDepth);
  w.Int(l.depth);
  key(kParams);
  w.Int(l.params);
  key(kInputs);
  w.BeginArray();
  for (const TensorInfo& t : l.inputs) WriteTensor(t, w);
  w.EndArray();
  key(kOutputs);
  w.BeginArray();
  for (const TensorInfo& t : l.outputs) WriteTensor(t, w);
  w.EndArray();
  key(kLatency);
  WriteLatest(l.latency_ms, l.forward_count, w);
  key(kLatencyMin);
  w.OptDouble(l.latency_ms_min);
  key(kLatencyMax);
  w.OptDouble(l.latency_ms_max);
  key(kLatencyMean);
  w.OptDouble(l.latency_ms_mean);
  key(kForwardCount);
  w.Int(l.forward_count);
  key(kHasNan);
  w.Bool(l.has_nan);
  key(kHasInf);
  w.Bool(l.has_inf);
  key(kGradNorm);
  w.OptDouble(l.grad_norm);
  key(kGradMean);
  w.OptDouble(l.grad_mean);
  key(kGradHasNan);
  w.Bool(l.grad_has_nan);
  key(kHasZeroGrad);
  w.Bool(l.has_zero_grad);
  key(kGradInNorm);
  w.OptDouble(l.grad_in_norm);
  key(kGradInMean);
  w.OptDouble(l.grad_in_mean);
  key(kGradInHasNan);
  w.Bool(l.grad_in_has_nan);
  key(kBwdLatency);
  WriteLatest(l.bwd_latency_ms, l.backward_count, w);
  key(kBwdLatencyMin);
  w.OptDouble(l.bwd_latency_ms_min);
  key(kBwdLatencyMax);
  w.OptDouble(l.bwd_latency_ms_max);
  key(kBwdLatencyMean);
  w.OptDouble(l.bwd_latency_ms_mean);
  key(kBackwardCount);
  w.Int(l.backward_count);
  key(kFwdMemAlloc);
  w.OptInt(l.fwd_mem_alloc_delta);
  key(kFwdMemReserved);
  w.OptInt(l.fwd_mem_reserved_delta);
  key(kBwdMemAlloc);
  w.OptInt(l.bwd_mem_alloc_delta);
  key(kBwdMemReserved);
  w.OptInt(l.bwd_mem_reserved_delta);
  w.EndObject();
}

void WriteMetadata(const TraceMetadata& m, JsonWriter& w) {
  const auto key = [&w](MetadataField f) { w.PlainKey(kMetadataFields[f]); };
  w.BeginObject();
  key(kModelName);
  w.String(m.model_name);
  key(kPytorchVersion);
  w.String(m.pytorch_version);
  key(kPythonVersion);
  w.String(m.python_version);
  key(kPlatform);
  w.String(m.platform);
  key(kCudaAvailable);
  w.Bool(m.cuda_available);
  key(kCudaVersion);
  w.String(m.cuda_version);
  key(kActiveDevice);
  w.String(m.active_device);
  key(kTotalTimeMs);
  w.OptDouble(m.total_time_ms);
  if (m.nan_origin) {
    key(kNanOrigin);
    w.BeginObject();
    w.PlainKey("layer");
    w.String(m.nan_origin->layer);
    w.PlainKey("step");
    w.Int(m.nan_origin->step);
    w.PlainKey("kind");
    w.String(m.nan_origin->is_nan ? "nan" : "inf");
    w.EndObject();
  }
  for (const auto& [k, v] : m.extra) {
    w.Key(k);
    w.RawValue(v);
  }
  w.EndObject();
}

// ---------------------------------------------------------------------------------------------
// Reading: locating syntax errors, and the tolerant rewrite of Python's non-finite tokens.

// Python's json module writes NaN, Infinity and -Infinity, which simdjson (rightly) rejects. When a
// document fails to parse, ScanJson checks it with a grammar that accepts them; if that is the only
// problem, the tokens are replaced by these sentinel strings (a NUL byte cannot appear in a real
// JSON string without an escape, and the reader only honours them for a rewritten document), and
// the number readers map them back.
constexpr std::string_view kNanSentinel = "\"\\u0000NaN\"";
constexpr std::string_view kInfSentinel = "\"\\u0000Infinity\"";
constexpr std::string_view kNegInfSentinel = "\"\\u0000-Infinity\"";

struct Edit {
  size_t offset;
  size_t length;
  std::string replacement;
};

struct ScanResult {
  bool ok = true;
  size_t error_offset = 0;
  std::string error;
  std::vector<Edit> edits;  // Tolerated non-standard input, to rewrite before parsing again.
};

constexpr int kMaxDepth = 1024;  // simdjson's default maximum nesting.

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
          if (stack.size() >= kMaxDepth) return Fail(pos_, "nesting too deep");
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
      const size_t len = json_internal::DecodeUtf8(text_, pos_, &cp);
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

std::string ApplyEdits(std::string_view text, const std::vector<Edit>& edits) {
  std::string out;
  out.reserve(text.size() + edits.size() * 16 + simdjson::SIMDJSON_PADDING);
  size_t at = 0;
  for (const Edit& e : edits) {
    out.append(text.substr(at, e.offset - at));
    out.append(e.replacement);
    at = e.offset + e.length;
  }
  out.append(text.substr(at));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reading: from the DOM to a TraceRecord.

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// Where a value sits in the document, for error messages. Built on the stack as the reader
// descends; rendered only when there is an error.
struct Path {
  const Path* parent = nullptr;
  std::string_view key;  // Member name when index < 0.
  int64_t index = -1;    // Array index.
};

void RenderPath(const Path& p, std::string* out) {
  if (p.parent == nullptr) return;  // The document root.
  RenderPath(*p.parent, out);
  if (p.index >= 0) {
    absl::StrAppend(out, "[", p.index, "]");
  } else {
    if (!out->empty()) out->push_back('.');
    out->append(p.key);
  }
}

absl::Status ShapeError(const Path& path, std::string_view problem) {
  std::string where;
  RenderPath(path, &where);
  if (where.empty()) where = "document";
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", absl::string_view(problem.data(), problem.size())));
}

class Reader {
 public:
  explicit Reader(bool rewritten) : rewritten_(rewritten) {}

  absl::Status ReadRecord(element root, TraceRecord* out) {
    const Path path;
    object obj;
    if (root.get(obj) != simdjson::SUCCESS) return ShapeError(path, "expected an object");
    bool have_layers = false;
    for (const auto field : obj) {
      const Path sub{&path, field.key};
      if (field.key == "metadata") {
        if (auto s = ReadMetadata(field.value, sub, &out->metadata); !s.ok()) return s;
      } else if (field.key == "layers") {
        have_layers = true;
        if (auto s = ReadLayers(field.value, sub, &out->layers); !s.ok()) return s;
      } else if (field.key == "warnings") {
        if (auto s = ReadWarnings(field.value, sub, &out->warnings); !s.ok()) return s;
      }
    }
    if (!have_layers) return ShapeError(Path{&path, "layers"}, "missing");
    return absl::OkStatus();
  }

 private:
  // ---- Scalars.

  // The value of a sentinel string standing for NaN/Infinity/-Infinity, if `e` is one.
  bool Sentinel(element e, double* out) const {
    if (!rewritten_) return false;
    std::string_view s;
    if (e.get(s) != simdjson::SUCCESS || s.empty() || s[0] != '\0') return false;
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

  absl::Status ReadString(element e, const Path& path, std::string* out) const {
    std::string_view s;
    if (e.get(s) != simdjson::SUCCESS) return ShapeError(path, "expected a string");
    double ignored;
    if (Sentinel(e, &ignored)) return ShapeError(path, "expected a string");
    out->assign(s.data(), s.size());
    return absl::OkStatus();
  }

  // null -> nullopt.
  absl::Status ReadOptDouble(element e, const Path& path, std::optional<double>* out) const {
    double v;
    if (e.get(v) == simdjson::SUCCESS) {
      *out = v;
      return absl::OkStatus();
    }
    if (e.is_null()) {
      out->reset();
      return absl::OkStatus();
    }
    if (Sentinel(e, &v)) {
      *out = v;
      return absl::OkStatus();
    }
    return ShapeError(path, "expected a number or null");
  }

  absl::Status ReadInt(element e, const Path& path, int64_t* out) const {
    switch (e.type()) {
      case element_type::INT64:
        *out = e.get_int64().value_unsafe();
        return absl::OkStatus();
      case element_type::DOUBLE: {
        // Accept 20.0 for 20: harmless, and some writers cannot tell ints from floats.
        const double d = e.get_double().value_unsafe();
        if (d >= -9.2233720368547758e18 && d < 9.2233720368547758e18 && d == std::trunc(d)) {
          *out = static_cast<int64_t>(d);
          return absl::OkStatus();
        }
        return ShapeError(path, "expected an integer");
      }
      case element_type::UINT64:
        return ShapeError(path, "integer out of range");
      default:
        return ShapeError(path, "expected an integer");
    }
  }

  absl::Status ReadOptInt(element e, const Path& path, std::optional<int64_t>* out) const {
    if (e.is_null()) {
      out->reset();
      return absl::OkStatus();
    }
    int64_t v;
    if (auto s = ReadInt(e, path, &v); !s.ok())
      return ShapeError(path, "expected an integer or null");
    *out = v;
    return absl::OkStatus();
  }

  absl::Status ReadInt32(element e, const Path& path, int32_t* out) const {
    int64_t v;
    if (auto s = ReadInt(e, path, &v); !s.ok()) return s;
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
      return ShapeError(path, "integer out of range");
    }
    *out = static_cast<int32_t>(v);
    return absl::OkStatus();
  }

  absl::Status ReadBool(element e, const Path& path, bool* out) const {
    if (e.get(*out) != simdjson::SUCCESS) return ShapeError(path, "expected true or false");
    return absl::OkStatus();
  }

  absl::Status GetArray(element e, const Path& path, array* out) const {
    if (e.get(*out) != simdjson::SUCCESS) return ShapeError(path, "expected an array");
    return absl::OkStatus();
  }

  absl::Status GetObject(element e, const Path& path, object* out) const {
    if (e.get(*out) != simdjson::SUCCESS) return ShapeError(path, "expected an object");
    return absl::OkStatus();
  }

  // ---- Structures.

  absl::Status ReadMetadata(element e, const Path& path, TraceMetadata* m) const {
    if (e.is_null()) return absl::OkStatus();
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    int guess = 0;
    for (const auto field : obj) {
      const Path sub{&path, field.key};
      const int id = FindField(kMetadataFields, field.key, guess);
      guess = id + 1;
      absl::Status s;
      switch (id) {
        case kModelName:
          s = ReadMetadataString(field.value, sub, &m->model_name);
          break;
        case kPytorchVersion:
          s = ReadMetadataString(field.value, sub, &m->pytorch_version);
          break;
        case kPythonVersion:
          s = ReadMetadataString(field.value, sub, &m->python_version);
          break;
        case kPlatform:
          s = ReadMetadataString(field.value, sub, &m->platform);
          break;
        case kCudaAvailable:
          s = ReadBool(field.value, sub, &m->cuda_available);
          break;
        case kCudaVersion:
          s = ReadMetadataString(field.value, sub, &m->cuda_version);
          break;
        case kActiveDevice:
          s = ReadMetadataString(field.value, sub, &m->active_device);
          break;
        case kTotalTimeMs:
          s = ReadOptDouble(field.value, sub, &m->total_time_ms);
          break;
        case kNanOrigin:
          s = ReadNanOrigin(field.value, sub, &m->nan_origin);
          break;
        default: {
          std::string text;
          JsonWriter w(0, &text);
          WriteElement(field.value, w);
          w.Finish();
          m->extra.emplace_back(std::string(field.key), std::move(text));
          break;
        }
      }
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Python writes None for versions it could not find; keep the default then.
  absl::Status ReadMetadataString(element e, const Path& path, std::string* out) const {
    if (e.is_null()) return absl::OkStatus();
    return ReadString(e, path, out);
  }

  absl::Status ReadNanOrigin(element e, const Path& path, std::optional<NanOrigin>* out) const {
    if (e.is_null()) {
      out->reset();
      return absl::OkStatus();
    }
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    NanOrigin origin;
    bool have_layer = false;
    for (const auto field : obj) {
      const Path sub{&path, field.key};
      absl::Status s;
      if (field.key == "layer") {
        have_layer = true;
        s = ReadString(field.value, sub, &origin.layer);
      } else if (field.key == "step") {
        s = ReadInt(field.value, sub, &origin.step);
      } else if (field.key == "kind") {
        std::string kind;
        s = ReadString(field.value, sub, &kind);
        if (s.ok()) {
          if (kind == "nan") {
            origin.is_nan = true;
          } else if (kind == "inf") {
            origin.is_nan = false;
          } else {
            s = ShapeError(sub, "expected \"nan\" or \"inf\"");
          }
        }
      }
      if (!s.ok()) return s;
    }
    if (!have_layer) return ShapeError(Path{&path, "layer"}, "missing");
    *out = std::move(origin);
    return absl::OkStatus();
  }

  // Re-serialises a DOM value (an unknown metadata key) as minified JSON in our own layout.
  void WriteElement(element e, JsonWriter& w) const {
    switch (e.type()) {
      case element_type::ARRAY:
        w.BeginArray();
        for (element child : array(e.get_array().value_unsafe())) WriteElement(child, w);
        w.EndArray();
        break;
      case element_type::OBJECT:
        w.BeginObject();
        for (const auto field : object(e.get_object().value_unsafe())) {
          w.Key(field.key);
          WriteElement(field.value, w);
        }
        w.EndObject();
        break;
      case element_type::INT64:
        w.Int(e.get_int64().value_unsafe());
        break;
      case element_type::UINT64:
        w.UInt(e.get_uint64().value_unsafe());
        break;
      case element_type::DOUBLE:
        w.Double(e.get_double().value_unsafe());
        break;
      case element_type::STRING: {
        double v;
        if (Sentinel(e, &v)) {
          w.Null();  // Strict output: non-finite numbers become null.
        } else {
          w.String(e.get_string().value_unsafe());
        }
        break;
      }
      case element_type::BOOL:
        w.Bool(e.get_bool().value_unsafe());
        break;
      case element_type::NULL_VALUE:
        w.Null();
        break;
    }
  }

  // Reads the array `e` element by element with `read_one` into `out`; errors name the index.
  template <typename T>
  absl::Status ReadArrayOf(element e, const Path& path,
                           absl::Status (Reader::*read_one)(element, const Path&, T*) const,
                           std::vector<T>* out) const {
    array arr;
    if (auto s = GetArray(e, path, &arr); !s.ok()) return s;
    out->reserve(arr.size());
    int64_t i = 0;
    for (element child : arr) {
      const Path sub{&path, {}, i++};
      out->emplace_back();
      if (auto s = (this->*read_one)(child, sub, &out->back()); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status ReadLayers(element e, const Path& path, std::vector<LayerTrace>* out) const {
    return ReadArrayOf(e, path, &Reader::ReadLayer, out);
  }

  absl::Status ReadLayer(element e, const Path& path, LayerTrace* l) const {
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    uint64_t seen = 0;
    int guess = 0;
    for (const auto field : obj) {
      const int id = FindField(kLayerFields, field.key, guess);
      if (id < 0) continue;  // Unknown layer keys are ignored.
      guess = id + 1;
      seen |= uint64_t{1} << id;
      const Path sub{&path, kLayerFields[id]};
      const element v = field.value;
      absl::Status s;
      switch (static_cast<LayerField>(id)) {
        case kName:
          s = ReadString(v, sub, &l->name);
          break;
        case kType:
          s = ReadString(v, sub, &l->type);
          break;
        case kFullName:
          s = ReadString(v, sub, &l->full_name);
          break;
        case kDepth:
          s = ReadInt32(v, sub, &l->depth);
          break;
        case kParams:
          s = ReadInt(v, sub, &l->params);
          break;
        case kInputs:
          s = ReadTensors(v, sub, &l->inputs);
          break;
        case kOutputs:
          s = ReadTensors(v, sub, &l->outputs);
          break;
        case kLatency:
          s = ReadOptDouble(v, sub, &l->latency_ms);
          break;
        case kLatencyMin:
          s = ReadOptDouble(v, sub, &l->latency_ms_min);
          break;
        case kLatencyMax:
          s = ReadOptDouble(v, sub, &l->latency_ms_max);
          break;
        case kLatencyMean:
          s = ReadOptDouble(v, sub, &l->latency_ms_mean);
          break;
        case kForwardCount:
          s = ReadInt(v, sub, &l->forward_count);
          break;
        case kHasNan:
          s = ReadBool(v, sub, &l->has_nan);
          break;
        case kHasInf:
          s = ReadBool(v, sub, &l->has_inf);
          break;
        case kGradNorm:
          s = ReadOptDouble(v, sub, &l->grad_norm);
          break;
        case kGradMean:
          s = ReadOptDouble(v, sub, &l->grad_mean);
          break;
        case kGradHasNan:
          s = ReadBool(v, sub, &l->grad_has_nan);
          break;
        case kHasZeroGrad:
          s = ReadBool(v, sub, &l->has_zero_grad);
          break;
        case kGradInNorm:
          s = ReadOptDouble(v, sub, &l->grad_in_norm);
          break;
        case kGradInMean:
          s = ReadOptDouble(v, sub, &l->grad_in_mean);
          break;
        case kGradInHasNan:
          s = ReadBool(v, sub, &l->grad_in_has_nan);
          break;
        case kBwdLatency:
          s = ReadOptDouble(v, sub, &l->bwd_latency_ms);
          break;
        case kBwdLatencyMin:
          s = ReadOptDouble(v, sub, &l->bwd_latency_ms_min);
          break;
        case kBwdLatencyMax:
          s = ReadOptDouble(v, sub, &l->bwd_latency_ms_max);
          break;
        case kBwdLatencyMean:
          s = ReadOptDouble(v, sub, &l->bwd_latency_ms_mean);
          break;
        case kBackwardCount:
          s = ReadInt(v, sub, &l->backward_count);
          break;
        case kFwdMemAlloc:
          s = ReadOptInt(v, sub, &l->fwd_mem_alloc_delta);
          break;
        case kFwdMemReserved:
          s = ReadOptInt(v, sub, &l->fwd_mem_reserved_delta);
          break;
        case kBwdMemAlloc:
          s = ReadOptInt(v, sub, &l->bwd_mem_alloc_delta);
          break;
        case kBwdMemReserved:
          s = ReadOptInt(v, sub, &l->bwd_mem_reserved_delta);
          break;
        case kNumLayerFields:
          break;
      }
      if (!s.ok()) return s;
    }

    const auto has = [seen](LayerField f) { return (seen & (uint64_t{1} << f)) != 0; };
    if (!has(kName)) return ShapeError(Path{&path, kLayerFields[kName]}, "missing");
    if (!has(kType)) return ShapeError(Path{&path, kLayerFields[kType]}, "missing");
    // Defaults for files written before the aggregation fields existed.
    if (!has(kFullName)) l->full_name = l->name;
    // A zero latency without a call is the library's "never ran" (see WriteLatest).
    const auto ran = [](const std::optional<double>& latency) {
      return latency.has_value() && *latency != 0.0;
    };
    if (!has(kForwardCount)) l->forward_count = ran(l->latency_ms) ? 1 : 0;
    if (l->forward_count == 0 && l->latency_ms == 0.0) l->latency_ms.reset();
    if (!has(kBackwardCount)) l->backward_count = ran(l->bwd_latency_ms) ? 1 : 0;
    if (l->backward_count == 0 && l->bwd_latency_ms == 0.0) l->bwd_latency_ms.reset();
    if (!has(kLatencyMin)) l->latency_ms_min = l->latency_ms;
    if (!has(kLatencyMax)) l->latency_ms_max = l->latency_ms;
    if (!has(kLatencyMean)) l->latency_ms_mean = l->latency_ms;
    if (!has(kBwdLatencyMin)) l->bwd_latency_ms_min = l->bwd_latency_ms;
    if (!has(kBwdLatencyMax)) l->bwd_latency_ms_max = l->bwd_latency_ms;
    if (!has(kBwdLatencyMean)) l->bwd_latency_ms_mean = l->bwd_latency_ms;
    return absl::OkStatus();
  }

  absl::Status ReadTensors(element e, const Path& path, std::vector<TensorInfo>* out) const {
    if (e.is_null()) return absl::OkStatus();
    return ReadArrayOf(e, path, &Reader::ReadTensor, out);
  }

  absl::Status ReadTensor(element e, const Path& path, TensorInfo* t) const {
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    bool have_shape = false;
    TensorStats stats;
    bool have_stats = false;
    std::optional<NonFiniteCounts> nonfinite;
    int guess = 0;
    for (const auto field : obj) {
      const int id = FindField(kTensorFields, field.key, guess);
      if (id < 0) continue;
      guess = id + 1;
      const Path sub{&path, kTensorFields[id]};
      const element v = field.value;
      absl::Status s;
      switch (static_cast<TensorField>(id)) {
        case kShape: {
          have_shape = true;
          array dims;
          if (v.get(dims) != simdjson::SUCCESS) {
            return ShapeError(sub, "expected an array of integers");
          }
          t->shape.reserve(dims.size());
          for (element d : dims) {
            int64_t n;
            if (d.get(n) != simdjson::SUCCESS) {
              return ShapeError(sub, "expected an array of integers");
            }
            t->shape.push_back(n);
          }
          break;
        }
        case kDtype:
          s = ReadString(v, sub, &t->dtype);
          break;
        case kDevice:
          s = ReadString(v, sub, &t->device);
          break;
        case kMean:
          have_stats = true;
          s = ReadOptDouble(v, sub, &stats.mean);
          break;
        case kStd:
          have_stats = true;
          s = ReadOptDouble(v, sub, &stats.std);
          break;
        case kMin:
          have_stats = true;
          s = ReadOptDouble(v, sub, &stats.min);
          break;
        case kMax:
          have_stats = true;
          s = ReadOptDouble(v, sub, &stats.max);
          break;
        case kNanCount:
          have_stats = true;
          s = ReadInt(v, sub, &stats.nan_count);
          break;
        case kInfCount:
          have_stats = true;
          s = ReadInt(v, sub, &stats.inf_count);
          break;
        case kNonFinite:
          s = ReadNonFinite(v, sub, &nonfinite);
          break;
        case kNumTensorFields:
          break;
      }
      if (!s.ok()) return s;
    }
    if (!have_shape) return ShapeError(Path{&path, kTensorFields[kShape]}, "missing");
    if (have_stats) {
      t->stats = stats;  // The statistics hold the counts; a "nonfinite" beside them is redundant.
    } else {
      t->nonfinite = nonfinite;
    }
    return absl::OkStatus();
  }

  absl::Status ReadNonFinite(element e, const Path& path,
                             std::optional<NonFiniteCounts>* out) const {
    if (e.is_null()) return absl::OkStatus();
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    NonFiniteCounts counts;
    for (const auto field : obj) {
      const Path sub{&path, field.key};
      absl::Status s;
      if (field.key == kTensorFields[kNanCount]) {
        s = ReadInt(field.value, sub, &counts.nan_count);
      } else if (field.key == kTensorFields[kInfCount]) {
        s = ReadInt(field.value, sub, &counts.inf_count);
      }
      if (!s.ok()) return s;
    }
    *out = counts;
    return absl::OkStatus();
  }

  absl::Status ReadWarnings(element e, const Path& path, std::vector<Anomaly>* out) const {
    if (e.is_null()) return absl::OkStatus();
    return ReadArrayOf(e, path, &Reader::ReadAnomaly, out);
  }

  absl::Status ReadAnomaly(element e, const Path& path, Anomaly* a) const {
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    bool have_type = false;
    bool have_severity = false;
    for (const auto field : obj) {
      const Path sub{&path, field.key};
      absl::Status s;
      std::string text;
      if (field.key == "type") {
        have_type = true;
        s = ReadString(field.value, sub, &text);
        if (s.ok() && !ParseAnomalyType(text, &a->type)) {
          // Another tool's or a newer version's check: kept as it is (UnknownAnomalyTypes()).
          a->type = AnomalyType::kUnknown;
          a->unknown_type = std::move(text);
        }
      } else if (field.key == "severity") {
        have_severity = true;
        s = ReadString(field.value, sub, &text);
        if (s.ok() && !ParseAnomalySeverity(text, &a->severity)) {
          s = ShapeError(sub, absl::StrCat("unknown severity \"", text, "\""));
        }
      } else if (field.key == "layer") {
        s = ReadString(field.value, sub, &a->layer);
      } else if (field.key == "message") {
        s = ReadString(field.value, sub, &a->message);
      } else if (field.key == "details") {
        s = ReadDetails(field.value, sub, &a->details);
      }
      if (!s.ok()) return s;
    }
    if (!have_type) return ShapeError(Path{&path, "type"}, "missing");
    if (!have_severity) return ShapeError(Path{&path, "severity"}, "missing");
    return absl::OkStatus();
  }

  absl::Status ReadDetails(element e, const Path& path, Details* out) const {
    if (e.is_null()) return absl::OkStatus();
    object obj;
    if (auto s = GetObject(e, path, &obj); !s.ok()) return s;
    for (const auto field : obj) {
      const Path sub{&path, field.key};
      DetailValue value;
      const element v = field.value;
      switch (v.type()) {
        case element_type::NULL_VALUE:
          break;
        case element_type::BOOL:
          value = v.get_bool().value_unsafe();
          break;
        case element_type::INT64:
          value = v.get_int64().value_unsafe();
          break;
        case element_type::UINT64:
          value = static_cast<double>(v.get_uint64().value_unsafe());
          break;
        case element_type::DOUBLE:
          value = v.get_double().value_unsafe();
          break;
        case element_type::STRING: {
          double d;
          if (Sentinel(v, &d)) {
            value = d;
          } else {
            value = std::string(v.get_string().value_unsafe());
          }
          break;
        }
        case element_type::ARRAY: {
          std::vector<std::string> strings;
          for (element item : array(v.get_array().value_unsafe())) {
            std::string_view s;
            double ignored;
            if (item.get(s) != simdjson::SUCCESS || Sentinel(item, &ignored)) {
              return ShapeError(sub, "expected an array of strings");
            }
            strings.emplace_back(s);
          }
          value = std::move(strings);
          break;
        }
        case element_type::OBJECT:
          return ShapeError(sub,
                            "expected null, a boolean, a number, a string or an array of strings");
      }
      out->emplace_back(std::string(field.key), std::move(value));
    }
    return absl::OkStatus();
  }

  // True when the document was rewritten from Python's non-standard tokens, so that the sentinel
  // strings stand for numbers.
  const bool rewritten_;
};

constexpr size_t kMaxRetainedDocument = size_t{64} << 20;

simdjson::dom::parser& ThreadParser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

absl::StatusOr<TraceRecord> ParseBuffer(std::string_view text, bool padded) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return absl::InvalidArgumentError("file is empty");
  }
  // A parser keeps its buffers (tape, strings) sized for the largest document it has parsed; a
  // fresh parser per call spends about as long faulting that memory in as parsing. Each thread
  // keeps one for documents up to kMaxRetainedDocument; larger ones get a parser freed after the
  // call.
  std::unique_ptr<simdjson::dom::parser> own_parser;
  if (text.size() > kMaxRetainedDocument) own_parser = std::make_unique<simdjson::dom::parser>();
  simdjson::dom::parser& parser = own_parser ? *own_parser : ThreadParser();
  TraceRecord record;
  // Fast path: standard JSON, parsed in place when the buffer has simdjson's padding.
  simdjson::dom::element root;
  simdjson::error_code error = parser.parse(text.data(), text.size(), !padded).get(root);
  if (error == simdjson::SUCCESS) {
    if (auto s = Reader(false).ReadRecord(root, &record); !s.ok()) return s;
    return record;
  }

  // Slow path: find what is wrong, or rewrite what Python wrote that simdjson rejects.
  ScanResult scan = Scanner(text).Run();
  if (!scan.ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(LineColumn(text, scan.error_offset), ": ", scan.error));
  }
  if (!scan.edits.empty()) {
    const std::string fixed = ApplyEdits(text, scan.edits);
    error = parser.parse(fixed).get(root);
    if (error == simdjson::SUCCESS) {
      if (auto s = Reader(true).ReadRecord(root, &record); !s.ok()) return s;
      return record;
    }
  }
  // The scanner accepted what simdjson rejected (e.g. a document over 4 GiB).
  return absl::InvalidArgumentError(
      absl::StrCat("line 1, column 1: cannot parse JSON: ", simdjson::error_message(error)));
}

}  // namespace

absl::StatusOr<TraceRecord> ParseTraceJson(std::string_view text) {
  return ParseBuffer(text, /*padded=*/false);
}

absl::StatusOr<TraceRecord> ReadTraceFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  // ReadFileToString leaves room past the end: parse in place when it is enough for simdjson.
  const bool padded = text->capacity() - text->size() >= simdjson::SIMDJSON_PADDING;
  return ParseBuffer(*text, padded);
}

std::string TraceToJson(const TraceRecord& record, JsonStyle style) {
  std::string out;
  JsonWriter w(style.indent, &out);
  // About what a layer with one input and one output takes; the writer grows as needed.
  w.Reserve(4096 + record.layers.size() * (style.indent > 0 ? 2048 : 1024));
  w.BeginObject();
  w.PlainKey("metadata");
  WriteMetadata(record.metadata, w);
  w.PlainKey("layers");
  w.BeginArray();
  for (const LayerTrace& layer : record.layers) WriteLayer(layer, w);
  w.EndArray();
  w.PlainKey("warnings");
  w.BeginArray();
  for (const Anomaly& a : record.warnings) {
    w.BeginObject();
    w.PlainKey("type");
    w.String(TypeName(a));
    w.PlainKey("severity");
    w.String(ToString(a.severity));
    w.PlainKey("layer");
    w.String(a.layer);
    w.PlainKey("message");
    w.String(a.message);
    w.PlainKey("details");
    WriteDetails(a.details, w);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.Finish();
  return out;
}

absl::Status WriteTraceFile(const std::string& path, const TraceRecord& record, JsonStyle style) {
  return WriteFileAtomic(path, TraceToJson(record, style));
}

std::string DiffToJson(const TraceDiff& diff, JsonStyle style) {
  std::string out;
  JsonWriter w(style.indent, &out);
  w.BeginObject();
  w.PlainKey("baseline_model");
  w.String(diff.baseline_model);
  w.PlainKey("current_model");
  w.String(diff.current_model);
  w.PlainKey("has_regressions");
  w.Bool(diff.has_regressions());
  w.PlainKey("critical_count");
  w.Int(diff.critical_count());
  w.PlainKey("warning_count");
  w.Int(diff.warning_count());
  w.PlainKey("entries");
  w.BeginArray();
  for (const DiffEntry& entry : diff.entries) {
    w.BeginObject();
    w.PlainKey("severity");
    w.String(ToString(entry.severity));
    w.PlainKey("kind");
    w.String(ToString(entry.kind));
    w.PlainKey("layer");
    w.String(entry.layer);
    w.PlainKey("message");
    w.String(entry.message);
    w.PlainKey("details");
    WriteDetails(entry.details, w);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.Finish();
  return out;
}

}  // namespace tracetorch
