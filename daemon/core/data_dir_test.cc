#include "daemon/core/data_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/testing/test_util.h"
#include "gtest/gtest.h"
#include "trace/atomic_file.h"

namespace tracetorch::daemon {
namespace {

using test_util::TempDir;

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(DataDirLock, ASecondHolderIsRefusedUntilTheFirstReleases) {
  TempDir dir;
  const std::string data = dir.path() + "/data";
  auto first = DataDirLock::Acquire(data);
  ASSERT_TRUE(first.ok()) << first.status();
  // flock locks belong to an open file: a second open in this process conflicts like another
  // daemon would.
  auto second = DataDirLock::Acquire(data);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  EXPECT_TRUE(absl::StrContains(
      second.status().message(),
      absl::StrCat("another tracetorchd (pid ", getpid(), ") is using the data directory ", data)))
      << second.status();
  first->reset();
  auto third = DataDirLock::Acquire(data);
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST(MakeDataDirectory, CreatesParentsWithMode0750WhateverTheUmask) {
  TempDir dir;
  const mode_t old = umask(0);
  const absl::Status s = MakeDataDirectory(dir.path() + "/a/b/c");
  umask(077);
  const absl::Status t = MakeDataDirectory(dir.path() + "/d");
  umask(old);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(t.ok()) << t;
  EXPECT_EQ(ModeOf(dir.path() + "/a"), 0750u);
  EXPECT_EQ(ModeOf(dir.path() + "/a/b/c"), 0750u);
  EXPECT_EQ(ModeOf(dir.path() + "/d"), 0750u);
  // An existing directory keeps its mode.
  ASSERT_EQ(chmod((dir.path() + "/d").c_str(), 0700), 0);
  ASSERT_TRUE(MakeDataDirectory(dir.path() + "/d").ok());
  EXPECT_EQ(ModeOf(dir.path() + "/d"), 0700u);
  // A file in the way is refused.
  std::ofstream(dir.path() + "/file") << "x";
  EXPECT_EQ(MakeDataDirectory(dir.path() + "/file/x").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(DataDirLock, TheLockFileIs0640WithThePid) {
  TempDir dir;
  const mode_t old = umask(0);
  auto lock = DataDirLock::Acquire(dir.path() + "/data");
  umask(old);
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_EQ(ModeOf(dir.path() + "/data/lock"), 0640u);
  EXPECT_EQ(ModeOf(dir.path() + "/data"), 0750u);
  absl::StatusOr<std::string> text = ReadFileToString(dir.path() + "/data/lock");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, absl::StrCat(getpid(), "\n"));
}

TEST(RemoveLeftoverTemps, RemovesOnlyTheTemporaryFilesOfAtomicWrites) {
  TempDir dir;
  std::ofstream(dir.path() + "/.index.json.tmp.99.1") << "partial";
  std::ofstream(dir.path() + "/index.json") << "{}";
  std::ofstream(dir.path() + "/.keep") << "";
  EXPECT_EQ(RemoveLeftoverTemps(dir.path()), 1);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/.index.json.tmp.99.1"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/index.json"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/.keep"));
}

}  // namespace
}  // namespace tracetorch::daemon
