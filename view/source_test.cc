#include "view/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tracetorch::view {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(TRACETORCH_FIXTURES_DIR) + "/upstream/" + name);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tt_cli_XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
}

// Replaces `path` by rename, as an atomic writer does.
void ReplaceFile(const std::string& path, const std::string& contents) {
  WriteFile(path + ".tmp", contents);
  ASSERT_EQ(::rename((path + ".tmp").c_str(), path.c_str()), 0);
}

TEST(DescribeLoadError, NamesFileAndProblemOnOneLine) {
  EXPECT_EQ(DescribeLoadError("nope.json", absl::NotFoundError("No such file or directory")),
            "nope.json: file not found");
  EXPECT_EQ(DescribeLoadError("x.json", absl::PermissionDeniedError("open: EACCES")),
            "x.json: permission denied");
  EXPECT_EQ(DescribeLoadError("bad.json", absl::InvalidArgumentError("line 3, column 17:\nbad")),
            "bad.json: line 3, column 17: bad");
  // A message that already names the file does not name it twice.
  EXPECT_EQ(DescribeLoadError("/tmp", absl::InvalidArgumentError("/tmp is a directory")),
            "/tmp: is a directory");
  EXPECT_EQ(DescribeLoadError("a.json", absl::InvalidArgumentError("a.json: empty")),
            "a.json: empty");
  EXPECT_EQ(DescribeLoadError("a", absl::InvalidArgumentError("ab: c")), "a: ab: c");
}

TEST(LoadTraceFile, ReadsFixture) {
  absl::StatusOr<TraceRecord> record =
      LoadTraceFile(std::string(TRACETORCH_FIXTURES_DIR) + "/upstream/train_trace.json");
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->metadata.model_name, "TrainNet");
  EXPECT_EQ(record->layers.size(), 11u);
}

TEST(LoadTraceFile, MissingFileIsNotFoundNamingThePath) {
  TempDir dir;
  const std::string path = dir.File("nope.json");
  absl::StatusOr<TraceRecord> record = LoadTraceFile(path);
  ASSERT_EQ(record.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(record.status().message(), path + ": file not found");
}

TEST(LoadTraceFile, BadJsonIsInvalidArgumentWithLineAndColumn) {
  TempDir dir;
  const std::string path = dir.File("bad.json");
  WriteFile(path, "{\n  \"metadata\": {\n    \"model_name\": ,\n");
  absl::StatusOr<TraceRecord> record = LoadTraceFile(path);
  ASSERT_EQ(record.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(record.status().message()), StartsWith(path + ": line 3, column "));
}

TEST(FileTraceSource, WaitsForMissingFileThenLoadsIt) {
  TempDir dir;
  const std::string path = dir.File("trace.json");
  FileTraceSource source(path);
  SourcePoll poll = source.Poll();
  EXPECT_EQ(poll.state, SourcePoll::State::kMissing);
  EXPECT_EQ(poll.message, "Waiting for " + path + " to appear... (Ctrl+C to exit)");

  WriteFile(path, Fixture("example_trace.json"));
  poll = source.Poll();
  ASSERT_EQ(poll.state, SourcePoll::State::kUpdated) << poll.message;
  EXPECT_EQ(poll.record.metadata.model_name, "SimpleTransformer");
  EXPECT_EQ(source.Poll().state, SourcePoll::State::kUnchanged);
}

TEST(FileTraceSource, SeesAtomicReplacementAndInvalidVersions) {
  TempDir dir;
  const std::string path = dir.File("trace.json");
  WriteFile(path, Fixture("example_trace.json"));
  FileTraceSource source(path);
  ASSERT_EQ(source.Poll().state, SourcePoll::State::kUpdated);

  ReplaceFile(path, Fixture("train_trace.json"));
  SourcePoll poll = source.Poll();
  ASSERT_EQ(poll.state, SourcePoll::State::kUpdated) << poll.message;
  EXPECT_EQ(poll.record.metadata.model_name, "TrainNet");

  ReplaceFile(path, "{\"metadata\": ");
  poll = source.Poll();
  EXPECT_EQ(poll.state, SourcePoll::State::kInvalid);
  EXPECT_THAT(poll.message, StartsWith(path + ": "));
  // An invalid version is looked at again on every poll, not cached.
  EXPECT_EQ(source.Poll().state, SourcePoll::State::kInvalid);

  ASSERT_EQ(::unlink(path.c_str()), 0);
  EXPECT_EQ(source.Poll().state, SourcePoll::State::kMissing);

  ReplaceFile(path, Fixture("train_trace.json"));
  EXPECT_EQ(source.Poll().state, SourcePoll::State::kUpdated);
}

TEST(FileTraceSource, SameSizeRewriteIsSeen) {
  TempDir dir;
  const std::string path = dir.File("trace.json");
  std::string text = Fixture("example_trace.json");
  WriteFile(path, text);
  FileTraceSource source(path);
  ASSERT_EQ(source.Poll().state, SourcePoll::State::kUpdated);
  // Same length, different model name, new inode.
  const size_t at = text.find("SimpleTransformer");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 17, "SimpleTransformes");
  ReplaceFile(path, text);
  SourcePoll poll = source.Poll();
  ASSERT_EQ(poll.state, SourcePoll::State::kUpdated);
  EXPECT_EQ(poll.record.metadata.model_name, "SimpleTransformes");
}

}  // namespace
}  // namespace tracetorch::view
