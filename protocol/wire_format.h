// The protobuf wire format as the ingest protocol's hand-written encoder and decoders read it:
// tags, varints, lengths and skipping unknown fields, with the limits and edge cases of
// libprotobuf's own parser (a tag or a length takes at most 5 bytes, a varint at most 10; a tag
// keeps its low 32 bits; an unknown group must end with its own end tag; nesting deeper than 100
// fails), so that what these functions accept is exactly what ParseFromArray accepts
// (frame_decoder_test.cc and fuzz/frame_fuzz.cc compare them).
//
// Internal to protocol/ (wire.cc, frame_decoder.cc). Thread-compatible: a Reader is a cursor.
#ifndef TRACETORCH_PROTOCOL_WIRE_FORMAT_H_
#define TRACETORCH_PROTOCOL_WIRE_FORMAT_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tracetorch::protocol::wire::format {

// Protobuf wire types.
inline constexpr uint32_t kVarint = 0;
inline constexpr uint32_t kFixed64 = 1;
inline constexpr uint32_t kLength = 2;
inline constexpr uint32_t kStartGroup = 3;
inline constexpr uint32_t kEndGroup = 4;
inline constexpr uint32_t kFixed32 = 5;

// libprotobuf's default recursion limit: nested messages and groups below the message parsed.
inline constexpr int kMaxDepth = 100;

class Reader {
 public:
  explicit Reader(std::string_view in) : p_(in.data()), end_(in.data() + in.size()) {}
  bool done() const { return p_ == end_; }
  const char* position() const { return p_; }

  // A varint of at most 10 bytes; bits beyond 64 are dropped.
  bool Varint(uint64_t* v) {
    if (p_ < end_ && static_cast<uint8_t>(*p_) < 0x80) {
      *v = static_cast<uint8_t>(*p_++);
      return true;
    }
    return VarintSlow(v);
  }
  bool VarintSlow(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70 && p_ < end_; shift += 7) {
      const uint8_t b = static_cast<uint8_t>(*p_++);
      if (shift < 64) result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return false;
  }
  // A tag or a length: at most 5 bytes, the low 32 bits kept.
  bool Varint32(uint32_t* v) {
    if (p_ < end_ && static_cast<uint8_t>(*p_) < 0x80) {
      *v = static_cast<uint8_t>(*p_++);
      return true;
    }
    if (end_ - p_ >= 2 && static_cast<uint8_t>(p_[1]) < 0x80) {
      *v = (static_cast<uint32_t>(static_cast<uint8_t>(p_[0])) & 0x7f) |
           (static_cast<uint32_t>(static_cast<uint8_t>(p_[1])) << 7);
      p_ += 2;
      return true;
    }
    return Varint32Slow(v);
  }
  bool Varint32Slow(uint32_t* v) {
    uint64_t result = 0;
    for (int i = 0; i < 5 && p_ < end_; ++i) {
      const uint8_t b = static_cast<uint8_t>(*p_++);
      result |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) {
        *v = static_cast<uint32_t>(result);
        return true;
      }
    }
    return false;
  }
  bool Fixed64(uint64_t* v) {
    if (end_ - p_ < 8) return false;
    uint64_t r = 0;
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(&r, p_, sizeof(r));
    } else {
      for (int i = 0; i < 8; ++i) {
        r |= static_cast<uint64_t>(static_cast<uint8_t>(p_[i])) << (8 * i);
      }
    }
    p_ += 8;
    *v = r;
    return true;
  }
  bool Double(double* v) {
    uint64_t bits;
    if (!Fixed64(&bits)) return false;
    std::memcpy(v, &bits, sizeof(bits));
    return true;
  }
  bool Bytes(size_t n, std::string_view* out) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    *out = std::string_view(p_, n);
    p_ += n;
    return true;
  }
  // A length-delimited value: its length (at most 5 bytes, below 2^31), then that many bytes.
  bool LengthDelimited(std::string_view* out) {
    uint32_t n;
    return Varint32(&n) && n < (1u << 31) && Bytes(n, out);
  }
  // The next tag, split. False at a malformed tag or a field number of 0 (never valid).
  bool Tag(uint32_t* field, uint32_t* wire_type) {
    uint32_t tag;
    if (!Varint32(&tag) || (tag >> 3) == 0) return false;
    *field = tag >> 3;
    *wire_type = tag & 7;
    return true;
  }
  // Skips the value of an unknown field; `depth` is what is left of kMaxDepth.
  bool Skip(uint32_t field, uint32_t wire_type, int depth) {
    uint64_t v;
    std::string_view ignored;
    switch (wire_type) {
      case kVarint:
        return Varint(&v);
      case kFixed64:
        return Bytes(8, &ignored);
      case kLength:
        return LengthDelimited(&ignored);
      case kFixed32:
        return Bytes(4, &ignored);
      case kStartGroup: {
        if (depth < 0) return false;
        while (true) {
          uint32_t f, wt;
          if (!Tag(&f, &wt)) return false;
          if (wt == kEndGroup) return f == field;
          if (!Skip(f, wt, depth - 1)) return false;
        }
      }
      default:  // An end group without its start, or wire types 6 and 7.
        return false;
    }
  }

 private:
  const char* p_;
  const char* end_;
};

inline int32_t ZigZagDecode32(uint32_t v) {
  return static_cast<int32_t>((v >> 1) ^ (~(v & 1) + 1));
}
inline int64_t ZigZagDecode64(uint64_t v) {
  return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
}

// Whether `s` is valid UTF-8 (no overlong forms, surrogates or code points above U+10FFFF), as
// libprotobuf requires of a proto3 string field.
bool IsValidUtf8(std::string_view s);

}  // namespace tracetorch::protocol::wire::format

#endif  // TRACETORCH_PROTOCOL_WIRE_FORMAT_H_
