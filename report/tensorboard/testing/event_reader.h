// Reads back the event files report/tensorboard/event_file.h writes, for tests (not part of
// tracetorch): TFRecord framing with both CRCs checked, and the Event fields parsed with
// libprotobuf's generic parser (UnknownFieldSet), so that the check does not share the writer's
// encoder. TensorBoard's own reader is the read-back check of tools/check_tensorboard.
#ifndef TRACETORCH_REPORT_TENSORBOARD_TESTING_EVENT_READER_H_
#define TRACETORCH_REPORT_TENSORBOARD_TESTING_EVENT_READER_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/unknown_field_set.h"
#include "report/tensorboard/crc32c.h"

namespace tracetorch::tensorboard::testing {

struct ReadEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;     // Only the first event has one.
  std::string tag;              // Empty for the file_version event.
  std::string plugin;           // "scalars", "text".
  int dtype = 0;                // 2 DT_DOUBLE, 7 DT_STRING.
  std::optional<double> value;  // A DT_DOUBLE scalar.
  std::string text;             // A DT_STRING scalar.
};

inline uint64_t LittleEndian(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

// The payloads of a TFRecord stream. DataLoss on a bad CRC or a cut record.
inline absl::StatusOr<std::vector<std::string>> SplitRecords(std::string_view data) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 12) return absl::DataLossError("cut record header");
    const std::string_view length = data.substr(pos, 8);
    const uint64_t n = LittleEndian(length);
    if (LittleEndian(data.substr(pos + 8, 4)) != MaskCrc32c(Crc32c(length))) {
      return absl::DataLossError("bad length CRC");
    }
    if (data.size() - pos - 12 < n + 4) return absl::DataLossError("cut record");
    const std::string_view payload = data.substr(pos + 12, n);
    if (LittleEndian(data.substr(pos + 12 + n, 4)) != MaskCrc32c(Crc32c(payload))) {
      return absl::DataLossError("bad data CRC");
    }
    out.emplace_back(payload);
    pos += 16 + n;
  }
  return out;
}

// The first field `number` of `set`, or null.
inline const google::protobuf::UnknownField* FindField(const google::protobuf::UnknownFieldSet& set,
                                                       int number) {
  for (int i = 0; i < set.field_count(); ++i) {
    if (set.field(i).number() == number) return &set.field(i);
  }
  return nullptr;
}

inline absl::StatusOr<ReadEvent> ParseEvent(const std::string& bytes) {
  using google::protobuf::UnknownField;
  using google::protobuf::UnknownFieldSet;
  UnknownFieldSet event;
  if (!event.ParseFromString(bytes)) return absl::DataLossError("not a message");
  ReadEvent out;
  if (const UnknownField* f = FindField(event, 1)) {
    const uint64_t bits = f->fixed64();
    std::memcpy(&out.wall_time, &bits, sizeof bits);
  }
  if (const UnknownField* f = FindField(event, 2)) out.step = static_cast<int64_t>(f->varint());
  if (const UnknownField* f = FindField(event, 3)) out.file_version = f->length_delimited();
  const UnknownField* summary_field = FindField(event, 5);
  if (summary_field == nullptr) return out;
  UnknownFieldSet summary, value, tensor, metadata, plugin;
  if (!summary.ParseFromString(summary_field->length_delimited()) || !FindField(summary, 1) ||
      !value.ParseFromString(FindField(summary, 1)->length_delimited())) {
    return absl::DataLossError("bad summary");
  }
  if (const UnknownField* f = FindField(value, 1)) out.tag = f->length_delimited();
  if (const UnknownField* f = FindField(value, 9);
      f && metadata.ParseFromString(f->length_delimited()) && FindField(metadata, 1) &&
      plugin.ParseFromString(FindField(metadata, 1)->length_delimited()) && FindField(plugin, 1)) {
    out.plugin = FindField(plugin, 1)->length_delimited();
  }
  const UnknownField* t = FindField(value, 8);
  if (t == nullptr || !tensor.ParseFromString(t->length_delimited())) {
    return absl::DataLossError("no tensor");
  }
  if (const UnknownField* f = FindField(tensor, 1)) out.dtype = static_cast<int>(f->varint());
  if (const UnknownField* f = FindField(tensor, 6); f && f->length_delimited().size() == 8) {
    const uint64_t bits = LittleEndian(f->length_delimited());
    double d;
    std::memcpy(&d, &bits, sizeof d);
    out.value = d;
  }
  if (const UnknownField* f = FindField(tensor, 8)) out.text = f->length_delimited();
  return out;
}

// Every event of the file at `path`.
inline absl::StatusOr<std::vector<ReadEvent>> ReadEventFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(path);
  std::stringstream s;
  s << in.rdbuf();
  absl::StatusOr<std::vector<std::string>> records = SplitRecords(s.str());
  if (!records.ok()) return records.status();
  std::vector<ReadEvent> out;
  for (const std::string& r : *records) {
    absl::StatusOr<ReadEvent> e = ParseEvent(r);
    if (!e.ok()) return e.status();
    out.push_back(*std::move(e));
  }
  return out;
}

// The event files (names containing "tfevents") directly in `dir`, sorted.
inline std::vector<std::string> EventFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().filename().string().find("tfevents") != std::string::npos) {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tracetorch::tensorboard::testing

#endif  // TRACETORCH_REPORT_TENSORBOARD_TESTING_EVENT_READER_H_
