// The one JSON writer of tracetorch: streaming, allocation-light, with Python's json.dump layout
// (`indent` spaces per level, "key": value, one element per line, "[]"/"{}" for empty
// containers; indent 0 writes one line without spaces), so that what we write reads like what
// tracetorch-ml writes.
//
// Strict RFC 8259: strings are escaped to ASCII like json.dump(ensure_ascii=True) (non-ASCII as
// \uXXXX, invalid UTF-8 as \ufffd); a non-finite double is written as `null`; doubles use Python's
// repr (shortest round-trip digits: "20.0", "1e-05"). The record writer (trace/json.h) and every
// JSON document our tools print go through it.
//
// Example:
//   std::string out;
//   JsonWriter w(/*indent=*/2, &out);
//   w.BeginObject();
//   w.PlainKey("layers");
//   w.Int(3);
//   w.EndObject();
//   w.Finish();  // Before reading `out`.
//
// Thread-compatible: one writer per output string.
#ifndef TRACETORCH_TRACE_JSON_WRITER_H_
#define TRACETORCH_TRACE_JSON_WRITER_H_

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tracetorch {

namespace json_internal {

// The most bytes PutDouble writes ("-1.2345678901234567e-308" is 24).
inline constexpr size_t kMaxDoubleChars = 32;

// Python's repr(float): shortest round-trip digits, positional for 1e-4 <= |v| < 1e16 (always with
// a fractional part: "20.0"), scientific otherwise ("1e-05", "1.5e+16"). Non-finite -> null.
// Writes at most kMaxDoubleChars bytes at `o`; returns the end.
char* PutDouble(double value, char* o);

// The most bytes PutJsonString writes for `n` input bytes: every byte may become "\u00XX".
constexpr size_t MaxEscapedSize(size_t n) { return 6 * n + 2; }

// Writes `value` as a quoted JSON string (ASCII only, see above). Needs MaxEscapedSize(size)
// bytes at `o`; returns the end.
char* PutJsonString(std::string_view value, char* o);

// Decodes one UTF-8 sequence starting at s[i]; returns its length, or 0 if it is not valid UTF-8.
size_t DecodeUtf8(std::string_view s, size_t i, uint32_t* cp);

}  // namespace json_internal

// Appends `value` as a JSON string literal (quoted, escaped) to `out`.
void AppendJsonString(std::string_view value, std::string* out);
// Appends `value` as Python's repr would write it (non-finite: null).
void AppendJsonDouble(double value, std::string* out);

// Appends to a string through a raw cursor: each call reserves the most it can write, then stores
// bytes without per-byte bounds checks. Call Finish() before using the string.
class JsonWriter {
 public:
  JsonWriter(int indent, std::string* out)
      : indent_(indent > 0 ? indent : 0), out_(out), pos_(out->data() + out->size()), end_(pos_) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  // Makes room for about `n` bytes up front, to avoid growing the string step by step.
  void Reserve(size_t n) { Ensure(n); }

  // Trims the string to what was written.
  void Finish() {
    out_->resize(pos_ - out_->data());
    pos_ = end_ = out_->data() + out_->size();
  }

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }

  // An object key that needs no escaping (our field names).
  void PlainKey(std::string_view key) {
    Ensure(SeparatorSize() + key.size() + 4);
    Separate();
    *pos_++ = '"';
    std::memcpy(pos_, key.data(), key.size());
    pos_ += key.size();
    *pos_++ = '"';
    *pos_++ = ':';
    if (indent_) *pos_++ = ' ';
    after_key_ = true;
  }
  void Key(std::string_view key) {
    Ensure(SeparatorSize() + json_internal::MaxEscapedSize(key.size()) + 2);
    Separate();
    pos_ = json_internal::PutJsonString(key, pos_);
    *pos_++ = ':';
    if (indent_) *pos_++ = ' ';
    after_key_ = true;
  }

  void Null() { Literal("null"); }
  void Bool(bool value) { Literal(value ? std::string_view("true") : std::string_view("false")); }
  void Int(int64_t value) {
    Ensure(SeparatorSize() + 24);
    BeginValue();
    pos_ = std::to_chars(pos_, pos_ + 24, value).ptr;
  }
  void UInt(uint64_t value) {
    Ensure(SeparatorSize() + 24);
    BeginValue();
    pos_ = std::to_chars(pos_, pos_ + 24, value).ptr;
  }
  void Double(double value) {
    Ensure(SeparatorSize() + json_internal::kMaxDoubleChars);
    BeginValue();
    pos_ = json_internal::PutDouble(value, pos_);
  }
  void String(std::string_view value) {
    Ensure(SeparatorSize() + json_internal::MaxEscapedSize(value.size()));
    BeginValue();
    pos_ = json_internal::PutJsonString(value, pos_);
  }
  void OptDouble(const std::optional<double>& value) {
    if (value) {
      Double(*value);
    } else {
      Null();
    }
  }
  void OptInt(const std::optional<int64_t>& value) {
    if (value) {
      Int(*value);
    } else {
      Null();
    }
  }

  // A value given as JSON text (TraceMetadata::extra), laid out like the rest of the document.
  // Whitespace outside strings is dropped; the text is otherwise trusted to be valid JSON.
  void RawValue(std::string_view json);

 private:
  // Makes room for `n` more bytes.
  void Ensure(size_t n) {
    if (static_cast<size_t>(end_ - pos_) >= n) return;
    const size_t used = pos_ - out_->data();
    out_->resize(std::max(out_->size() * 2, used + n + 4096));
    pos_ = out_->data() + used;
    end_ = out_->data() + out_->size();
  }
  size_t NewlineSize(int level) const {
    return indent_ ? 1 + static_cast<size_t>(level) * indent_ : 0;
  }
  // The most Separate() writes.
  size_t SeparatorSize() const { return 1 + NewlineSize(static_cast<int>(counts_.size())); }

  void Literal(std::string_view text) {
    Ensure(SeparatorSize() + text.size());
    BeginValue();
    std::memcpy(pos_, text.data(), text.size());
    pos_ += text.size();
  }
  void Open(char c) {
    Ensure(SeparatorSize() + 1);
    BeginValue();
    *pos_++ = c;
    counts_.push_back(0);
  }
  void Close(char c) {
    const int count = counts_.back();
    counts_.pop_back();
    Ensure(NewlineSize(static_cast<int>(counts_.size())) + 1);
    if (count > 0) Newline(static_cast<int>(counts_.size()));
    *pos_++ = c;
  }
  // REQUIRES: SeparatorSize() bytes of room.
  void BeginValue() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    Separate();
  }
  void Separate() {
    if (counts_.empty()) return;
    if (counts_.back()++ > 0) *pos_++ = ',';
    Newline(static_cast<int>(counts_.size()));
  }
  void Newline(int level) {
    if (indent_ == 0) return;
    *pos_++ = '\n';
    const size_t spaces = static_cast<size_t>(level) * indent_;
    std::memset(pos_, ' ', spaces);
    pos_ += spaces;
  }

  const int indent_;
  std::string* const out_;
  char* pos_;                // Next byte to write, within *out_.
  char* end_;                // End of *out_'s current size.
  std::vector<int> counts_;  // Elements written so far, per open container.
  bool after_key_ = false;
};

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_JSON_WRITER_H_
