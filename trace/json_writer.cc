#include "trace/json_writer.h"

#include <cmath>
#include <system_error>

namespace tracetorch {
namespace json_internal {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

char* PutUnicodeEscape(uint32_t unit, char* o) {
  o[0] = '\\';
  o[1] = 'u';
  o[2] = kHexDigits[(unit >> 12) & 0xF];
  o[3] = kHexDigits[(unit >> 8) & 0xF];
  o[4] = kHexDigits[(unit >> 4) & 0xF];
  o[5] = kHexDigits[unit & 0xF];
  return o + 6;
}

}  // namespace

size_t DecodeUtf8(std::string_view s, size_t i, uint32_t* cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  const size_t left = s.size() - i;
  const auto cont = [&](size_t k) { return k < s.size() && (byte(k) & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (left < 2 || !cont(i + 1)) return 0;
    *cp = ((b0 & 0x1Fu) << 6) | (byte(i + 1) & 0x3Fu);
    return 2;
  }
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (left < 3 || !cont(i + 1) || !cont(i + 2)) return 0;
    const unsigned char b1 = byte(i + 1);
    if (b0 == 0xE0 && b1 < 0xA0) return 0;  // Overlong.
    if (b0 == 0xED && b1 > 0x9F) return 0;  // Surrogate.
    *cp = ((b0 & 0x0Fu) << 12) | ((b1 & 0x3Fu) << 6) | (byte(i + 2) & 0x3Fu);
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (left < 4 || !cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    const unsigned char b1 = byte(i + 1);
    if (b0 == 0xF0 && b1 < 0x90) return 0;  // Overlong.
    if (b0 == 0xF4 && b1 > 0x8F) return 0;  // Above U+10FFFF.
    *cp = ((b0 & 0x07u) << 18) | ((b1 & 0x3Fu) << 12) | ((byte(i + 2) & 0x3Fu) << 6) |
          (byte(i + 3) & 0x3Fu);
    return 4;
  }
  return 0;
}

char* PutDouble(double value, char* o) {
  if (!std::isfinite(value)) {
    std::memcpy(o, "null", 4);
    return o + 4;
  }
  char sci[40];
  const auto [end, ec] =
      std::to_chars(sci, sci + sizeof(sci), value, std::chars_format::scientific);
  if (ec != std::errc()) {  // Cannot happen with this buffer size; stay valid JSON regardless.
    std::memcpy(o, "null", 4);
    return o + 4;
  }
  // sci is "[-]d[.ddd]e(+|-)XX".
  const char* p = sci;
  if (*p == '-') *o++ = *p++;
  char digits[24];
  int n_digits = 0;
  digits[n_digits++] = *p++;
  if (*p == '.') {
    ++p;
    while (*p != 'e') digits[n_digits++] = *p++;
  }
  ++p;  // 'e'
  const bool negative_exponent = *p == '-';
  ++p;  // sign
  int exponent = 0;
  while (p < end) exponent = exponent * 10 + (*p++ - '0');
  if (negative_exponent) exponent = -exponent;

  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      const int int_digits = exponent + 1;
      for (int i = 0; i < int_digits; ++i) *o++ = i < n_digits ? digits[i] : '0';
      *o++ = '.';
      if (n_digits > int_digits) {
        for (int i = int_digits; i < n_digits; ++i) *o++ = digits[i];
      } else {
        *o++ = '0';
      }
    } else {
      *o++ = '0';
      *o++ = '.';
      for (int i = 0; i < -exponent - 1; ++i) *o++ = '0';
      for (int i = 0; i < n_digits; ++i) *o++ = digits[i];
    }
  } else {
    *o++ = digits[0];
    if (n_digits > 1) {
      *o++ = '.';
      for (int i = 1; i < n_digits; ++i) *o++ = digits[i];
    }
    *o++ = 'e';
    *o++ = exponent < 0 ? '-' : '+';
    const int mag = exponent < 0 ? -exponent : exponent;
    if (mag < 10) *o++ = '0';
    o = std::to_chars(o, o + 4, mag).ptr;
  }
  return o;
}

// Writes `value` as a quoted JSON string, ASCII only like Python's json.dump(ensure_ascii=True):
// non-ASCII characters become \uXXXX (surrogate pairs above U+FFFF), bytes that are not UTF-8
// become \ufffd. Needs MaxEscapedSize(value.size()) bytes at `o`; returns the end.
char* PutJsonString(std::string_view value, char* o) {
  *o++ = '"';
  const char* const data = value.data();
  const size_t n = value.size();
  size_t run = 0;  // Start of the pending run of bytes that need no escaping.
  size_t i = 0;
  while (i < n) {
    const auto c = static_cast<unsigned char>(data[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    std::memcpy(o, data + run, i - run);
    o += i - run;
    size_t consumed = 1;
    switch (c) {
      case '"':
        *o++ = '\\';
        *o++ = '"';
        break;
      case '\\':
        *o++ = '\\';
        *o++ = '\\';
        break;
      case '\n':
        *o++ = '\\';
        *o++ = 'n';
        break;
      case '\r':
        *o++ = '\\';
        *o++ = 'r';
        break;
      case '\t':
        *o++ = '\\';
        *o++ = 't';
        break;
      case '\b':
        *o++ = '\\';
        *o++ = 'b';
        break;
      case '\f':
        *o++ = '\\';
        *o++ = 'f';
        break;
      default:
        if (c < 0x20) {
          o = PutUnicodeEscape(c, o);
        } else {
          uint32_t cp = 0;
          const size_t len = DecodeUtf8(value, i, &cp);
          if (len == 0) {
            o = PutUnicodeEscape(0xFFFD, o);  // Not UTF-8: one replacement per bad byte.
          } else if (cp >= 0x10000) {
            cp -= 0x10000;
            o = PutUnicodeEscape(0xD800 + (cp >> 10), o);
            o = PutUnicodeEscape(0xDC00 + (cp & 0x3FF), o);
            consumed = len;
          } else {
            o = PutUnicodeEscape(cp, o);
            consumed = len;
          }
        }
    }
    i += consumed;
    run = i;
  }
  std::memcpy(o, data + run, n - run);
  o += n - run;
  *o++ = '"';
  return o;
}

}  // namespace json_internal

void AppendJsonString(std::string_view value, std::string* out) {
  const size_t old_size = out->size();
  out->resize(old_size + json_internal::MaxEscapedSize(value.size()));
  char* const end = json_internal::PutJsonString(value, out->data() + old_size);
  out->resize(end - out->data());
}

void AppendJsonDouble(double value, std::string* out) {
  char buf[json_internal::kMaxDoubleChars];
  out->append(buf, json_internal::PutDouble(value, buf) - buf);
}

void JsonWriter::RawValue(std::string_view json) {
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    Null();
    return;
  }
  Ensure(SeparatorSize());
  BeginValue();
  int level = static_cast<int>(counts_.size());
  for (size_t i = 0; i < json.size(); ++i) {
    Ensure(NewlineSize(level + 1) + 2);
    const char c = json[i];
    switch (c) {
      case ' ':
      case '\t':
      case '\r':
      case '\n':
        break;
      case '"': {
        const size_t start = i++;
        while (i < json.size() && json[i] != '"') {
          if (json[i] == '\\') ++i;
          ++i;
        }
        const std::string_view literal = json.substr(start, i - start + 1);
        Ensure(literal.size());
        std::memcpy(pos_, literal.data(), literal.size());
        pos_ += literal.size();
        break;
      }
      case '{':
      case '[': {
        const size_t next = json.find_first_not_of(" \t\r\n", i + 1);
        const char close = c == '{' ? '}' : ']';
        *pos_++ = c;
        if (next != std::string_view::npos && json[next] == close) {
          *pos_++ = close;
          i = next;
        } else {
          Newline(++level);
        }
        break;
      }
      case '}':
      case ']':
        Newline(--level);
        *pos_++ = c;
        break;
      case ',':
        *pos_++ = ',';
        Newline(level);
        break;
      case ':':
        *pos_++ = ':';
        if (indent_) *pos_++ = ' ';
        break;
      default:
        *pos_++ = c;
    }
  }
}

}  // namespace tracetorch
