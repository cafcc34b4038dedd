#include "daemon/core/session_key.h"

#include <sys/stat.h>

#include <string>

#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"
#include "trace/atomic_file.h"

namespace tracetorch::daemon {
namespace {

// The reference vectors of the SipHash paper's implementation (key 00..0f, input 00..len-1).
TEST(SipHash24, MatchesTheReferenceVectors) {
  std::array<uint8_t, 16> key;
  for (uint8_t i = 0; i < 16; ++i) key[i] = i;
  std::string in;
  EXPECT_EQ(SipHash24(key, in), 0x726fdb47dd0e0e31ULL);
  in.push_back('\0');
  EXPECT_EQ(SipHash24(key, in), 0x74f839c593dc67fdULL);
  for (char c = 1; c < 15; ++c) in.push_back(c);
  EXPECT_EQ(SipHash24(key, in), 0xa129ca6149be45e5ULL);  // 15 bytes: a partial last word.
}

TEST(SessionKey, TagsBindAnIdToItsUid) {
  absl::StatusOr<SessionKey> key = SessionKey::Random();
  ASSERT_TRUE(key.ok()) << key.status();
  const std::string id = key->Tag("20260101T000000Z-box-7-1", 1000);
  EXPECT_EQ(id.substr(0, 25), "20260101T000000Z-box-7-1-");
  EXPECT_EQ(id.size(), 25u + 16u);
  EXPECT_TRUE(key->Owns(id, 1000));
  EXPECT_FALSE(key->Owns(id, 1001));
  EXPECT_FALSE(key->Owns("20260101T000000Z-box-7-1", 1000));  // Untagged (an older daemon's).
  std::string forged = id;
  forged.back() = forged.back() == '0' ? '1' : '0';
  EXPECT_FALSE(key->Owns(forged, 1000));
  absl::StatusOr<SessionKey> other = SessionKey::Random();
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->Owns(id, 1000));
}

TEST(SessionKey, PersistsInTheDataDirectory) {
  test_util::TempDir dir("ttkey");
  absl::StatusOr<SessionKey> first = SessionKey::LoadOrCreate(dir.path());
  ASSERT_TRUE(first.ok()) << first.status();
  struct stat st {};
  ASSERT_EQ(stat((dir.path() + "/session_key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::StatusOr<SessionKey> again = SessionKey::LoadOrCreate(dir.path());
  ASSERT_TRUE(again.ok()) << again.status();
  const std::string id = first->Tag("base", 5);
  EXPECT_TRUE(again->Owns(id, 5));

  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/session_key", "short", 0600).ok());
  absl::StatusOr<SessionKey> bad = SessionKey::LoadOrCreate(dir.path());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("session_key"), std::string::npos);
}

}  // namespace
}  // namespace tracetorch::daemon
