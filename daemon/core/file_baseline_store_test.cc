#include "daemon/core/file_baseline_store.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/testing/records.h"
#include "daemon/testing/test_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "trace/atomic_file.h"
#include "trace/json.h"
#include "trace/testing/unprivileged.h"
#include "tracetorch/v1/baseline_sidecar.pb.h"

namespace tracetorch::daemon {
namespace {

using test_util::MakeLinearRecord;
using test_util::TempDir;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<v1::LayerHistory> MakeHistory() {
  v1::LayerHistory h;
  h.set_full_name("l0");
  for (int s = 0; s < 6; ++s) {
    h.add_steps(static_cast<uint64_t>(s));
    h.add_latency_ms(0.5 + 0.01 * s);
    h.add_output_std(std::nan(""));  // Unknown values survive as NaN.
    h.add_grad_norm(1.0);
    h.add_non_finite(s == 3);
  }
  return {h};
}

// FNV-1a 64 as 16 hex digits: the fingerprint of NAME.json every sidecar has carried (pinned here:
// changing it would orphan every stored history).
std::string Fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return absl::StrFormat("%016x", h);
}

std::string ReadAll(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

std::vector<std::string> Names(const std::vector<v1::BaselineInfo>& list) {
  std::vector<std::string> out;
  for (const v1::BaselineInfo& b : list) out.push_back(b.name());
  return out;
}

TEST(FileBaselineStore, NamesAreOnePlainFileName) {
  for (const char* ok : {"main", "v1.2", "release_2026-11", "a", "A.b-c_d"}) {
    EXPECT_TRUE(BaselineStore::ValidateName(ok).ok()) << ok;
  }
  EXPECT_TRUE(BaselineStore::ValidateName(std::string(128, 'x')).ok());
  for (const std::string& bad : {std::string(""), std::string("../x"), std::string("a/b"),
                                 std::string(".hidden"), std::string(".."), std::string("a b"),
                                 std::string("a\nb"), std::string(129, 'x'), std::string("ä")}) {
    const absl::Status s = BaselineStore::ValidateName(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(BaselineStore::ValidateName("a/b").message(), HasSubstr("letters, digits"));
  EXPECT_THAT(BaselineStore::ValidateName("").message(), HasSubstr("empty"));
}

TEST(FileBaselineStore, BadNamesNeverTouchTheDisk) {
  TempDir dir{"ttbase"};
  FileBaselineStore store(dir.path());
  for (const char* bad : {"../x", "a/b", "", "../../etc/passwd"}) {
    EXPECT_EQ(store.Set(bad, MakeLinearRecord("Net", 1), {}, "upload").status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_EQ(store.Get(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store.Remove(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/x.json"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/baselines"));
}

TEST(FileBaselineStore, SetGetRoundTripWithHistory) {
  TempDir dir{"ttbase"};
  FileBaselineStore store(dir.path(), [] { return absl::FromUnixSeconds(1700000000); });
  const TraceRecord record = MakeLinearRecord("Net", 3);
  auto info = store.Set("main", record, MakeHistory(), "session s-1");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name(), "main");
  EXPECT_EQ(info->created_unix_ns(), 1700000000ll * 1000000000ll);
  EXPECT_EQ(info->source(), "session s-1");
  EXPECT_EQ(info->model_name(), "Net");
  EXPECT_EQ(info->layers(), 3u);
  EXPECT_TRUE(info->has_history());

  auto got = store.Get("main");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->record, record);
  EXPECT_EQ(got->info.SerializeAsString(), info->SerializeAsString());
  ASSERT_EQ(got->history.size(), 1u);
  const v1::LayerHistory& h = got->history[0];
  const v1::LayerHistory want = MakeHistory()[0];
  EXPECT_EQ(h.full_name(), "l0");
  ASSERT_EQ(h.latency_ms_size(), 6);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(h.steps(i), want.steps(i));
    EXPECT_EQ(h.latency_ms(i), want.latency_ms(i));
    EXPECT_TRUE(std::isnan(h.output_std(i)));
    EXPECT_EQ(h.non_finite(i), want.non_finite(i));
  }

  // The record is a plain trace file, readable by `tracetorch inspect`.
  auto file = ReadTraceFile(store.dir() + "/main.json");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*file, record);
}

TEST(FileBaselineStore, SetReplacesAndListIsByName) {
  TempDir dir{"ttbase"};
  FileBaselineStore store(dir.path());
  ASSERT_TRUE(store.Set("zeta", MakeLinearRecord("Z", 1), {}, "upload").ok());
  ASSERT_TRUE(store.Set("alpha", MakeLinearRecord("A", 2), MakeHistory(), "session x").ok());
  ASSERT_TRUE(store.Set("mid.v2", MakeLinearRecord("M", 1), {}, "upload").ok());
  ASSERT_TRUE(store.Set("alpha", MakeLinearRecord("A2", 4), {}, "upload").ok());  // Replaces.
  auto list = store.List();
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_THAT(Names(*list), ElementsAre("alpha", "mid.v2", "zeta"));
  EXPECT_EQ((*list)[0].model_name(), "A2");
  EXPECT_EQ((*list)[0].layers(), 4u);
  EXPECT_FALSE((*list)[0].has_history());
  EXPECT_EQ((*list)[0].source(), "upload");
  auto alpha = store.Get("alpha");
  ASSERT_TRUE(alpha.ok());
  EXPECT_THAT(alpha->history, IsEmpty());
}

TEST(FileBaselineStore, RemoveAndNotFound) {
  TempDir dir{"ttbase"};
  FileBaselineStore store(dir.path());
  EXPECT_EQ(store.Remove("main").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.Get("main").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(store.Get("main").status().message(), HasSubstr("no baseline named 'main'"));
  auto empty = store.List();
  ASSERT_TRUE(empty.ok()) << empty.status();  // No folder yet: nothing, not an error.
  EXPECT_THAT(*empty, IsEmpty());

  ASSERT_TRUE(store.Set("main", MakeLinearRecord("Net", 1), MakeHistory(), "upload").ok());
  ASSERT_TRUE(store.Remove("main").ok());
  EXPECT_EQ(store.Get("main").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.Remove("main").code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(store.dir() + "/.main.meta.json"));
  auto list = store.List();
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(*list, IsEmpty());
}

TEST(FileBaselineStore, FilesAre0640AndItsDirectory0750UnderUmask022) {
  TempDir dir{"ttbase"};
  const mode_t old = umask(022);
  FileBaselineStore store(dir.path());
  const bool set = store.Set("main", MakeLinearRecord("Net", 2), MakeHistory(), "upload").ok();
  umask(old);
  ASSERT_TRUE(set);
  auto mode = [](const std::string& path) {
    struct stat st;
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  };
  EXPECT_EQ(mode(dir.path() + "/baselines"), 0750u);
  EXPECT_EQ(mode(dir.path() + "/baselines/main.json"), 0640u);
  EXPECT_EQ(mode(dir.path() + "/baselines/.main.meta.json"), 0640u);
}

TEST(FileBaselineStore, SurvivesANewStoreOnTheSameDirectory) {
  TempDir dir{"ttbase"};
  {
    FileBaselineStore store(dir.path());
    ASSERT_TRUE(store.Set("main", MakeLinearRecord("Net", 2), MakeHistory(), "session s").ok());
  }
  FileBaselineStore again(dir.path());
  auto got = again.Get("main");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->info.source(), "session s");
  EXPECT_EQ(got->history.size(), 1u);
}

TEST(FileBaselineStore, AHandPlacedOrMismatchedFileHasNoHistory) {
  TempDir dir{"ttbase"};
  FileBaselineStore store(dir.path());
  ASSERT_TRUE(store.Set("main", MakeLinearRecord("Net", 2), MakeHistory(), "session s").ok());
  // Someone replaces the record by hand (or a crash hit between the two writes): the sidecar no
  // longer belongs to it, so its history must not be used.
  ASSERT_TRUE(WriteTraceFile(store.dir() + "/main.json", MakeLinearRecord("Other", 5)).ok());
  // And copies a trace file in.
  ASSERT_TRUE(WriteTraceFile(store.dir() + "/copied.json", MakeLinearRecord("Copied", 1)).ok());
  auto main = store.Get("main");
  ASSERT_TRUE(main.ok()) << main.status();
  EXPECT_EQ(main->record.metadata.model_name, "Other");
  EXPECT_THAT(main->history, IsEmpty());
  EXPECT_EQ(main->info.source(), "file");
  EXPECT_EQ(main->info.layers(), 5u);
  EXPECT_FALSE(main->info.has_history());
  auto list = store.List();
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(Names(*list), ElementsAre("copied", "main"));
  EXPECT_EQ((*list)[0].model_name(), "Copied");
  EXPECT_GT((*list)[0].created_unix_ns(), 0);
}

TEST(FileBaselineStore, UnreadableFilesAreListedAndGetSaysWhy) {
  TempDir dir{"ttbase"};
  FileBaselineStore store(dir.path());
  ASSERT_TRUE(store.Set("good", MakeLinearRecord("Net", 1), {}, "upload").ok());
  ASSERT_TRUE(WriteFileAtomic(store.dir() + "/broken.json", "{not json").ok());
  ASSERT_TRUE(WriteFileAtomic(store.dir() + "/.hidden.json", "{}").ok());  // Not a name.
  ASSERT_TRUE(WriteFileAtomic(store.dir() + "/notes.txt", "x").ok());
  auto list = store.List();
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(Names(*list), ElementsAre("broken", "good"));
  EXPECT_THAT((*list)[0].source(), HasSubstr("unreadable"));
  const absl::Status s = store.Get("broken").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("broken.json"));
}

TEST(FileBaselineStore, WithoutADataDirEveryCallIsFailedPrecondition) {
  FileBaselineStore store("");
  EXPECT_EQ(store.Set("main", MakeLinearRecord("Net", 1), {}, "upload").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.Get("main").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.List().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.Remove("main").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.List().status().message(), HasSubstr("--data-dir"));
}

TEST(FileBaselineStore, UnwritableDirectoryIsAnError) {
  TempDir dir{"ttbase"};
  // Anyone may look, no one may write. Root ignores that: the check runs unprivileged.
  ASSERT_EQ(chmod(dir.path().c_str(), 0555), 0);
  tracetorch::testing::ExpectAsUnprivileged([&] {
    FileBaselineStore store(dir.path());
    const absl::Status s = store.Set("main", MakeLinearRecord("Net", 1), {}, "upload").status();
    return s.code() == absl::StatusCode::kPermissionDenied &&
           absl::StrContains(s.message(), dir.path());
  });
  ASSERT_EQ(chmod(dir.path().c_str(), 0700), 0);
}

TEST(FileBaselineStore, TheSidecarIsOneProtobufJsonMessage) {
  TempDir dir{"ttbase"};
  FileBaselineStore store(dir.path(), [] { return absl::FromUnixSeconds(1700000000); });
  ASSERT_TRUE(store.Set("main", MakeLinearRecord("Net", 2), MakeHistory(), "session s-1").ok());
  v1::BaselineSidecar sidecar;
  const std::string text = ReadAll(store.dir() + "/.main.meta.json");
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text, &sidecar).ok()) << text;
  EXPECT_EQ(sidecar.format(), "tracetorch-baseline-meta/1");
  EXPECT_EQ(sidecar.record_fnv1a64(), Fnv1a64(ReadAll(store.dir() + "/main.json")));
  EXPECT_EQ(sidecar.info().name(), "main");
  EXPECT_EQ(sidecar.info().source(), "session s-1");
  EXPECT_EQ(sidecar.info().created_unix_ns(), 1700000000ll * 1000000000ll);
  ASSERT_EQ(sidecar.history_size(), 1);
  EXPECT_EQ(sidecar.history(0).steps_size(), 6);
  EXPECT_TRUE(std::isnan(sidecar.history(0).output_std(0)));
  // Field names as in the .proto, which is the layout sidecars always had.
  EXPECT_THAT(text, HasSubstr("\"record_fnv1a64\""));
  EXPECT_THAT(text, HasSubstr("\"created_unix_ns\""));
}

TEST(FileBaselineStore, ReadsSidecarsWrittenByEarlierVersions) {
  TempDir dir{"ttbase"};
  FileBaselineStore store(dir.path());
  ASSERT_TRUE(std::filesystem::create_directories(store.dir()));
  ASSERT_TRUE(WriteTraceFile(store.dir() + "/main.json", MakeLinearRecord("Net", 2)).ok());
  const std::string print = Fnv1a64(ReadAll(store.dir() + "/main.json"));
  // Byte for byte what the writer before BaselineSidecar produced (its own framing around
  // protobuf JSON pieces: spaces and newlines, int64 as strings, NaN as "NaN").
  const std::string old = absl::StrCat(
      "{\"format\": \"tracetorch-baseline-meta/1\",\n \"record_fnv1a64\": \"", print,
      "\",\n \"info\": {\"name\":\"main\",\"created_unix_ns\":\"1600000000000000000\","
      "\"source\":\"session s-old\",\"model_name\":\"Net\",\"layers\":2,\"has_history\":true},"
      "\n \"history\": [\n  "
      "{\"full_name\":\"l0\",\"steps\":[\"0\",\"1\"],\"latency_ms\":[0.5,0.75],"
      "\"output_std\":[\"NaN\",1],\"grad_norm\":[1,1],\"non_finite\":[false,true]}]}\n");
  ASSERT_TRUE(WriteFileAtomic(store.dir() + "/.main.meta.json", old).ok());
  auto got = store.Get("main");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->info.source(), "session s-old");
  EXPECT_EQ(got->info.created_unix_ns(), 1600000000000000000ll);
  EXPECT_TRUE(got->info.has_history());
  ASSERT_EQ(got->history.size(), 1u);
  const v1::LayerHistory& h = got->history[0];
  ASSERT_EQ(h.steps_size(), 2);
  EXPECT_EQ(h.steps(1), 1u);
  EXPECT_EQ(h.latency_ms(1), 0.75);
  EXPECT_TRUE(std::isnan(h.output_std(0)));
  EXPECT_TRUE(h.non_finite(1));
  auto list = store.List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].source(), "session s-old");

  // A field a later version may add is ignored; another format is not ours (no history).
  std::string newer = old;
  newer.insert(1, "\"added_later\": 7, ");
  ASSERT_TRUE(WriteFileAtomic(store.dir() + "/.main.meta.json", newer).ok());
  EXPECT_EQ(store.Get("main")->history.size(), 1u);
  std::string other = old;
  other.replace(other.find("meta/1"), 6, "meta/2");
  ASSERT_TRUE(WriteFileAtomic(store.dir() + "/.main.meta.json", other).ok());
  EXPECT_THAT(store.Get("main")->history, IsEmpty());
  EXPECT_EQ(store.Get("main")->info.source(), "file");
}

TEST(FileBaselineStore, ConcurrentSetsAndReadsSeeWholeBaselines) {
  TempDir dir{"ttbase"};
  FileBaselineStore store(dir.path());
  ASSERT_TRUE(store.Set("main", MakeLinearRecord("Net", 1), MakeHistory(), "upload").ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, t] {
      for (int i = 0; i < 20; ++i) {
        const int layers = 1 + (t + i) % 4;
        EXPECT_TRUE(
            store.Set("main", MakeLinearRecord("Net", layers), MakeHistory(), "upload").ok());
        auto got = store.Get("main");
        ASSERT_TRUE(got.ok()) << got.status();
        // Record and sidecar always belong together.
        EXPECT_EQ(got->info.layers(), got->record.layers.size());
        EXPECT_EQ(got->history.size(), 1u);
        EXPECT_TRUE(store.List().ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace
}  // namespace tracetorch::daemon
