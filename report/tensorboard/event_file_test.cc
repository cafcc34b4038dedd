#include "report/tensorboard/event_file.h"

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "report/tensorboard/crc32c.h"
#include "report/tensorboard/testing/event_reader.h"

namespace tracetorch::tensorboard {
namespace {

using testing::LittleEndian;
using testing::ParseEvent;
using testing::ReadEvent;
using testing::ReadEventFile;
using testing::SplitRecords;

TEST(EventFile, FramesARecordAsTfRecordDoes) {
  const std::string framed = FrameRecord("abc");
  ASSERT_EQ(framed.size(), 3u + 16u);
  EXPECT_EQ(LittleEndian(framed.substr(0, 8)), 3u);
  EXPECT_EQ(LittleEndian(framed.substr(8, 4)), MaskCrc32c(Crc32c(framed.substr(0, 8))));
  EXPECT_EQ(framed.substr(12, 3), "abc");
  EXPECT_EQ(LittleEndian(framed.substr(15, 4)), MaskCrc32c(Crc32c("abc")));
  std::string corrupt = framed;
  corrupt[13] = 'X';
  EXPECT_EQ(SplitRecords(corrupt).status().code(), absl::StatusCode::kDataLoss);
}

TEST(EventFile, ScalarEventIsADoubleTensorWithTheScalarsPlugin) {
  const double value = 0.1 + 0.2;  // Not representable as float32.
  absl::StatusOr<ReadEvent> e =
      ParseEvent(EncodeScalarEvent(1700000000.5, 42, "layers/a.b/x", value));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->wall_time, 1700000000.5);
  EXPECT_EQ(e->step, 42);
  EXPECT_EQ(e->tag, "layers/a.b/x");
  EXPECT_EQ(e->plugin, "scalars");
  EXPECT_EQ(e->dtype, 2);  // DT_DOUBLE
  ASSERT_TRUE(e->value.has_value());
  EXPECT_EQ(*e->value, value);  // Bit for bit.
}

TEST(EventFile, TextEventIsAStringTensorWithTheTextPlugin) {
  absl::StatusOr<ReadEvent> e = ParseEvent(EncodeTextEvent(1.0, 7, "anomalies", "| a | b |"));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->tag, "anomalies");
  EXPECT_EQ(e->plugin, "text");
  EXPECT_EQ(e->dtype, 7);  // DT_STRING
  EXPECT_EQ(e->text, "| a | b |");
}

class EventFileWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/event_file_test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(EventFileWriterTest, WritesTheVersionThenEachEventAndCreatesTheDirectory) {
  EventFileOptions options;
  options.wall_time = 1234.0;
  absl::StatusOr<std::unique_ptr<EventFileWriter>> w =
      EventFileWriter::Create(dir_ + "/runs/one", options);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_NE((*w)->path().find("/runs/one/events.out.tfevents.1234."), std::string::npos);
  ASSERT_TRUE((*w)->AddScalar("s", 3, 2.5).ok());
  ASSERT_TRUE((*w)->AddText("t", 3, "hello").ok());
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ((*w)->AddScalar("s", 4, 1.0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*w)->events_written(), 3u);

  absl::StatusOr<std::vector<ReadEvent>> events = ReadEventFile((*w)->path());
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].file_version, "brain.Event:2");
  EXPECT_EQ((*events)[1].tag, "s");
  EXPECT_EQ((*events)[1].step, 3);
  EXPECT_EQ((*events)[1].value, 2.5);
  EXPECT_EQ((*events)[1].wall_time, 1234.0);
  EXPECT_EQ((*events)[2].text, "hello");
}

TEST_F(EventFileWriterTest, TwoWritersInOneDirectoryGetTwoFiles) {
  auto a = EventFileWriter::Create(dir_, {});
  auto b = EventFileWriter::Create(dir_, {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->path(), (*b)->path());
  EXPECT_EQ(testing::EventFiles(dir_).size(), 2u);
}

TEST_F(EventFileWriterTest, ADirectoryThatIsAFileIsRefused) {
  std::ofstream(dir_ + "/file") << "x";
  auto w = EventFileWriter::Create(dir_ + "/file/sub", {});
  EXPECT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("file/sub"), std::string::npos);
  EXPECT_EQ(EventFileWriter::Create("", {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::tensorboard
