#include "daemon/core/session_key.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "trace/atomic_file.h"

namespace tracetorch::daemon {
namespace {

uint64_t Load64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

void Round(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
  v0 += v1;
  v1 = Rotl(v1, 13);
  v1 ^= v0;
  v0 = Rotl(v0, 32);
  v2 += v3;
  v3 = Rotl(v3, 16);
  v3 ^= v2;
  v0 += v3;
  v3 = Rotl(v3, 21);
  v3 ^= v0;
  v2 += v1;
  v1 = Rotl(v1, 17);
  v1 ^= v2;
  v2 = Rotl(v2, 32);
}

constexpr size_t kTagDigits = 16;

}  // namespace

uint64_t SipHash24(const std::array<uint8_t, 16>& key, std::string_view data) {
  const uint64_t k0 = Load64(key.data());
  const uint64_t k1 = Load64(key.data() + 8);
  uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
  uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
  uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
  uint64_t v3 = 0x7465646279746573ULL ^ k1;
  const auto* in = reinterpret_cast<const uint8_t*>(data.data());
  const size_t len = data.size();
  const size_t whole = len - len % 8;
  for (size_t i = 0; i < whole; i += 8) {
    const uint64_t m = Load64(in + i);
    v3 ^= m;
    Round(v0, v1, v2, v3);
    Round(v0, v1, v2, v3);
    v0 ^= m;
  }
  uint64_t b = static_cast<uint64_t>(len) << 56;
  for (size_t i = whole; i < len; ++i) b |= static_cast<uint64_t>(in[i]) << (8 * (i - whole));
  v3 ^= b;
  Round(v0, v1, v2, v3);
  Round(v0, v1, v2, v3);
  v0 ^= b;
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) Round(v0, v1, v2, v3);
  return v0 ^ v1 ^ v2 ^ v3;
}

absl::StatusOr<SessionKey> SessionKey::Random() {
  std::array<uint8_t, 16> key;
  size_t got = 0;
  while (got < key.size()) {
    const ssize_t n = getrandom(key.data() + got, key.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  return SessionKey(key);
}

absl::StatusOr<SessionKey> SessionKey::LoadOrCreate(const std::string& data_dir) {
  const std::string path = absl::StrCat(data_dir, "/session_key");
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (text.ok()) {
    if (text->size() != 16) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": a session key is 16 bytes, this file has ", text->size()));
    }
    std::array<uint8_t, 16> key;
    std::memcpy(key.data(), text->data(), key.size());
    return SessionKey(key);
  }
  if (text.status().code() != absl::StatusCode::kNotFound) return text.status();
  absl::StatusOr<SessionKey> made = Random();
  if (!made.ok()) return made.status();
  const std::string bytes(reinterpret_cast<const char*>(made->key_.data()), made->key_.size());
  if (absl::Status s = WriteFileAtomic(path, bytes, 0600); !s.ok()) return s;
  return made;
}

std::string SessionKey::Tag(std::string_view base, int32_t uid) const {
  const absl::string_view b(base.data(), base.size());
  const std::string message = absl::StrCat(uid, ":", b);
  return absl::StrCat(b, "-", absl::StrFormat("%016x", SipHash24(key_, message)));
}

bool SessionKey::Owns(std::string_view id, int32_t uid) const {
  if (id.size() < kTagDigits + 2 || id[id.size() - kTagDigits - 1] != '-') return false;
  const std::string_view base = id.substr(0, id.size() - kTagDigits - 1);
  return Tag(base, uid) == id;
}

}  // namespace tracetorch::daemon
