#include "trace/atomic_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "trace/json.h"
#include "trace/record.h"
#include "trace/testing/unprivileged.h"

namespace tracetorch {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "/atomic_file_test.XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

 private:
  std::string path_;
};

TEST(WriteFileAtomic, WritesAndReplaces) {
  TempDir dir;
  const std::string path = dir.path() + "/f.txt";
  ASSERT_TRUE(WriteFileAtomic(path, "first version").ok());
  EXPECT_EQ(*ReadFileToString(path), "first version");
  ASSERT_TRUE(WriteFileAtomic(path, "2nd").ok());
  EXPECT_EQ(*ReadFileToString(path), "2nd");
  ASSERT_TRUE(WriteFileAtomic(path, "").ok());
  EXPECT_EQ(*ReadFileToString(path), "");
  // No temporary file is left behind.
  EXPECT_EQ(dir.Entries(), std::vector<std::string>{"f.txt"});
}

TEST(WriteFileAtomic, WritesLargeAndBinaryContents) {
  TempDir dir;
  const std::string path = dir.path() + "/big.bin";
  std::string contents(5 << 20, '\0');
  for (size_t i = 0; i < contents.size(); ++i) contents[i] = static_cast<char>(i * 131 % 251);
  ASSERT_TRUE(WriteFileAtomic(path, contents).ok());
  absl::StatusOr<std::string> back = ReadFileToString(path);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == contents);
}

TEST(WriteFileAtomic, KeepsThePermissionsOfTheReplacedFile) {
  TempDir dir;
  const std::string path = dir.path() + "/f.txt";
  ASSERT_TRUE(WriteFileAtomic(path, "a").ok());
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  ASSERT_TRUE(WriteFileAtomic(path, "b").ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

TEST(WriteFileAtomic, AnExplicitModeHoldsWhateverTheUmask) {
  TempDir dir;
  const std::string path = dir.path() + "/f.txt";
  const mode_t old_umask = ::umask(0);  // The most permissive umask: 0666 would stay 0666.
  const absl::Status fresh = WriteFileAtomic(path, "a", 0640);
  ::umask(022);
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/g.txt", "b", 0640).ok());
  ::umask(077);  // The most restrictive: 0640 must not become 0600.
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/h.txt", "c", 0640).ok());
  ::umask(old_umask);
  ASSERT_TRUE(fresh.ok()) << fresh;
  for (const char* name : {"/f.txt", "/g.txt", "/h.txt"}) {
    struct stat st;
    ASSERT_EQ(::stat((dir.path() + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u) << name;
  }
  // Replacing a file gives it the mode asked for, not the old one's.
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  ASSERT_TRUE(WriteFileAtomic(path, "d", 0640).ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

TEST(WriteFileAtomic, ItsTemporaryFilesAreRecognised) {
  EXPECT_TRUE(IsAtomicWriteTemp(".index.json.tmp.123.4"));
  EXPECT_FALSE(IsAtomicWriteTemp("index.json"));
  EXPECT_FALSE(IsAtomicWriteTemp(".hidden"));
  EXPECT_FALSE(IsAtomicWriteTemp("x.tmp.1"));
}

TEST(WriteFileAtomic, MissingDirectoryIsNotFound) {
  TempDir dir;
  const absl::Status s = WriteFileAtomic(dir.path() + "/no/such/dir/f.txt", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("open("), absl::string_view::npos) << s;
}

TEST(WriteFileAtomic, FailedRenameRemovesTheTemporaryFile) {
  TempDir dir;
  const std::string target = dir.path() + "/occupied";
  std::filesystem::create_directory(target);
  std::filesystem::create_directory(target + "/child");  // rename() cannot replace it.
  const absl::Status s = WriteFileAtomic(target, "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rename("), absl::string_view::npos) << s;
  EXPECT_EQ(dir.Entries(), std::vector<std::string>{"occupied"});
}

TEST(WriteFileAtomic, RejectsDirectoryPaths) {
  EXPECT_EQ(WriteFileAtomic("", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteFileAtomic("/tmp/", "x").code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReadFileToString, Errors) {
  TempDir dir;
  EXPECT_EQ(ReadFileToString(dir.path() + "/missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadFileToString(dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
}

using ::tracetorch::testing::ExpectAsUnprivileged;

TEST(ReadFileToString, UnreadableFileIsPermissionDenied) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string path = dir.path() + "/locked";
  ASSERT_TRUE(WriteFileAtomic(path, "secret").ok());
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  ExpectAsUnprivileged([&] {
    return ReadFileToString(path).status().code() == absl::StatusCode::kPermissionDenied;
  });
}

TEST(WriteFileAtomic, UnwritableDirectoryIsPermissionDenied) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  const std::string path = dir.path() + "/f.txt";
  ExpectAsUnprivileged([&] {
    const absl::Status s = WriteFileAtomic(path, "x");
    return s.code() == absl::StatusCode::kPermissionDenied &&
           s.message().find("Permission denied") != absl::string_view::npos;
  });
}

TEST(ReadFileInto, ReusesTheBufferAndKeepsPaddingPastTheEnd) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/a", std::string(100000, 'a')).ok());
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/b", std::string(100100, 'b')).ok());
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/c", "c").ok());
  std::string buffer;
  ASSERT_TRUE(ReadFileInto(dir.path() + "/a", &buffer).ok());
  EXPECT_EQ(buffer, std::string(100000, 'a'));
  const char* const first = buffer.data();
  // A slightly larger file fits the spare the first read left: no new memory.
  ASSERT_TRUE(ReadFileInto(dir.path() + "/b", &buffer).ok());
  EXPECT_EQ(buffer, std::string(100100, 'b'));
  EXPECT_EQ(buffer.data(), first);
  ASSERT_TRUE(ReadFileInto(dir.path() + "/c", &buffer).ok());
  EXPECT_EQ(buffer, "c");
  EXPECT_EQ(buffer.data(), first);
  EXPECT_GE(buffer.capacity() - buffer.size(), 64u);
  // A failed read leaves the buffer empty.
  EXPECT_EQ(ReadFileInto(dir.path() + "/missing", &buffer).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(buffer.empty());
}

TEST(ReadFileToString, ReadsFilesWithoutAKnownSize) {
  // /proc files report size 0; the reader must not trust st_size.
  absl::StatusOr<std::string> s = ReadFileToString("/proc/self/status");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NE(s->find("Name:"), std::string::npos);
}

TraceRecord RecordWithLayers(int n, const std::string& model) {
  TraceRecord r;
  r.metadata.model_name = model;
  for (int i = 0; i < n; ++i) {
    LayerTrace l;
    l.name = "fc" + std::to_string(i);
    l.full_name = "blocks." + std::to_string(i) + ".fc";
    l.type = "Linear";
    l.depth = 3;
    l.latency_ms = 0.25 * i;
    l.forward_count = i + 1;
    l.outputs.push_back(
        TensorInfo{{16, 64}, "torch.float32", "cpu", TensorStats{0.5, 1.0, -1, 1, 0, 0}});
    r.layers.push_back(std::move(l));
  }
  return r;
}

// A reader re-reading and parsing the file while a writer replaces it must always see one complete
// version: never a torn, empty or missing file.
TEST(WriteFileAtomic, ConcurrentReaderNeverSeesATornFile) {
  TempDir dir;
  const std::string path = dir.path() + "/trace.json";
  // Two versions of very different sizes, so a torn read cannot parse as either.
  const TraceRecord small = RecordWithLayers(20, "small");
  const TraceRecord large = RecordWithLayers(600, "large");
  ASSERT_TRUE(WriteTraceFile(path, small).ok());

  constexpr int kWrites = 150;
  absl::Mutex mu;
  int64_t reads = 0;  // Guarded by mu.
  std::atomic<bool> done{false};
  std::atomic<int64_t> torn{0};
  std::atomic<int64_t> saw_small{0};
  std::atomic<int64_t> saw_large{0};
  absl::Notification reader_started;

  std::thread reader([&] {
    while (true) {
      const bool last = done.load();
      absl::StatusOr<TraceRecord> r = ReadTraceFile(path);
      if (!r.ok()) {
        ++torn;
      } else if (*r == small) {
        ++saw_small;
      } else if (*r == large) {
        ++saw_large;
      } else {
        ++torn;
      }
      {
        absl::MutexLock lock(&mu);
        ++reads;
      }
      if (!reader_started.HasBeenNotified()) reader_started.Notify();
      if (last) break;
    }
  });

  reader_started.WaitForNotification();
  struct Progress {
    const int64_t* reads;
    int64_t before;
  };
  for (int i = 0; i < kWrites; ++i) {
    Progress progress{&reads, 0};
    {
      absl::MutexLock lock(&mu);
      progress.before = reads;
    }
    const absl::Status s = WriteTraceFile(path, i % 2 == 0 ? large : small);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) break;
    // Handshake: let the reader finish at least one more read before the next replacement, so the
    // two threads keep interleaving whatever the scheduler does.
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](Progress* p) { return *p->reads > p->before; }, &progress));
  }
  done.store(true);
  reader.join();

  EXPECT_EQ(torn.load(), 0);
  EXPECT_GT(saw_small.load(), 0);
  EXPECT_GT(saw_large.load(), 0);
  EXPECT_EQ(dir.Entries(), std::vector<std::string>{"trace.json"});
}

TEST(WriteFileAtomic, ConcurrentWritersEachLeaveACompleteFile) {
  TempDir dir;
  const std::string path = dir.path() + "/f.txt";
  const std::string a(100000, 'a');
  const std::string b(50000, 'b');
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        if (!WriteFileAtomic(path, t % 2 == 0 ? a : b).ok()) ++failures;
      }
    });
  }
  for (std::thread& w : writers) w.join();
  EXPECT_EQ(failures.load(), 0);
  absl::StatusOr<std::string> final_contents = ReadFileToString(path);
  ASSERT_TRUE(final_contents.ok());
  EXPECT_TRUE(*final_contents == a || *final_contents == b);
  EXPECT_EQ(dir.Entries(), std::vector<std::string>{"f.txt"});
}

}  // namespace
}  // namespace tracetorch
