// Who may continue a session the daemon does not know: a session id ends in a tag that binds it to
// the peer uid it was made for, keyed with a secret of the data directory, so that a daemon that
// restarted before persisting a session can still recognise its owner, and nobody else can take
// the id over (SessionManager::Open).
//
//   "<base>-<16 hex digits: SipHash-2-4 of (uid, base) under the key>"
//
// The key: 16 random bytes in DATA_DIR/session_key (mode 0600), made on the first start; without a
// data directory a fresh key per process (nothing outlives it then anyway).
//
// Thread-safe: a SessionKey is immutable.
#ifndef TRACETORCH_DAEMON_CORE_SESSION_KEY_H_
#define TRACETORCH_DAEMON_CORE_SESSION_KEY_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tracetorch::daemon {

// SipHash-2-4 (Aumasson and Bernstein) of `data` under `key`: a keyed PRF, 64 bits.
uint64_t SipHash24(const std::array<uint8_t, 16>& key, std::string_view data);

class SessionKey {
 public:
  // Reads DATA_DIR/session_key, or makes it (random, 0600) when absent. Internal when the random
  // source or the file fails; InvalidArgument when the file is not 16 bytes (the message names
  // it).
  static absl::StatusOr<SessionKey> LoadOrCreate(const std::string& data_dir);
  // A random key that lives as long as the process (no data directory).
  static absl::StatusOr<SessionKey> Random();

  // `base` + "-" + the tag of (uid, base).
  std::string Tag(std::string_view base, int32_t uid) const;
  // Whether `id` is Tag(base, uid) for its own base.
  bool Owns(std::string_view id, int32_t uid) const;

 private:
  explicit SessionKey(std::array<uint8_t, 16> key) : key_(key) {}
  std::array<uint8_t, 16> key_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_SESSION_KEY_H_
