#include "report/tensorboard/event_file.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "report/tensorboard/crc32c.h"

namespace tracetorch::tensorboard {
namespace {

// ---- Protobuf wire format, the few pieces the messages need
// --------------------------------------

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutTag(uint32_t field, WireType type, std::string* out) {
  PutVarint((field << 3) | type, out);
}

void PutFixed64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void PutFixed32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint64_t DoubleBits(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}

void PutBytesField(uint32_t field, std::string_view bytes, std::string* out) {
  PutTag(field, kLengthDelimited, out);
  PutVarint(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}

void PutDoubleField(uint32_t field, double value, std::string* out) {
  PutTag(field, kFixed64, out);
  PutFixed64(DoubleBits(value), out);
}

// Field numbers (event.proto, summary.proto, tensor.proto, types.proto).
constexpr uint32_t kEventWallTime = 1;     // double
constexpr uint32_t kEventStep = 2;         // int64
constexpr uint32_t kEventFileVersion = 3;  // string
constexpr uint32_t kEventSummary = 5;      // Summary
constexpr uint32_t kSummaryValue = 1;      // repeated Summary.Value
constexpr uint32_t kValueTag = 1;          // string
constexpr uint32_t kValueTensor = 8;       // TensorProto
constexpr uint32_t kValueMetadata = 9;     // SummaryMetadata
constexpr uint32_t kMetadataPluginData = 1;
constexpr uint32_t kMetadataDataClass = 4;  // enum DataClass
constexpr uint32_t kPluginName = 1;
constexpr uint32_t kTensorDtype = 1;
constexpr uint32_t kTensorShape = 2;
constexpr uint32_t kTensorDoubleVal = 6;  // packed repeated double
constexpr uint32_t kTensorStringVal = 8;  // repeated bytes
constexpr uint64_t kDtDouble = 2;
constexpr uint64_t kDtString = 7;
constexpr uint64_t kDataClassScalar = 1;
constexpr uint64_t kDataClassTensor = 2;

std::string Metadata(std::string_view plugin, uint64_t data_class) {
  std::string plugin_data;
  PutBytesField(kPluginName, plugin, &plugin_data);
  std::string out;
  PutBytesField(kMetadataPluginData, plugin_data, &out);
  PutTag(kMetadataDataClass, kVarint, &out);
  PutVarint(data_class, &out);
  return out;
}

// An Event holding one Summary.Value of `tag` with `tensor` and `metadata`.
std::string ValueEvent(double wall_time, int64_t step, std::string_view tag,
                       const std::string& tensor, const std::string& metadata) {
  std::string value;
  PutBytesField(kValueTag, tag, &value);
  PutBytesField(kValueTensor, tensor, &value);
  PutBytesField(kValueMetadata, metadata, &value);
  std::string summary;
  PutBytesField(kSummaryValue, value, &summary);
  std::string event;
  PutDoubleField(kEventWallTime, wall_time, &event);
  PutTag(kEventStep, kVarint, &event);
  PutVarint(static_cast<uint64_t>(step), &event);
  PutBytesField(kEventSummary, summary, &event);
  return event;
}

// A scalar tensor (shape []) of `dtype` whose values are `values` (already encoded fields).
std::string ScalarTensor(uint64_t dtype, const std::string& values) {
  std::string tensor;
  PutTag(kTensorDtype, kVarint, &tensor);
  PutVarint(dtype, &tensor);
  PutBytesField(kTensorShape, "", &tensor);  // TensorShapeProto with no dims: a scalar.
  tensor += values;
  return tensor;
}

std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "localhost";
  std::string out;
  for (const char* c = host; *c != '\0'; ++c) {
    const bool safe = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                      (*c >= '0' && *c <= '9') || *c == '-' || *c == '.';
    out.push_back(safe ? *c : '_');
  }
  return out;
}

// mkdir -p with mode 0755; the first failure's errno, or 0.
int MakeDirs(const std::string& dir) {
  std::string prefix;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    prefix = dir.substr(0, pos);
    if (prefix.empty()) continue;
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return errno;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

std::atomic<uint64_t> file_counter{0};

}  // namespace

std::string FrameRecord(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  std::string length;
  PutFixed64(payload.size(), &length);
  out += length;
  PutFixed32(MaskCrc32c(Crc32c(length)), &out);
  out.append(payload.data(), payload.size());
  PutFixed32(MaskCrc32c(Crc32c(payload)), &out);
  return out;
}

std::string EncodeFileVersionEvent(double wall_time) {
  std::string event;
  PutDoubleField(kEventWallTime, wall_time, &event);
  PutBytesField(kEventFileVersion, "brain.Event:2", &event);
  return event;
}

std::string EncodeScalarEvent(double wall_time, int64_t step, std::string_view tag, double value) {
  std::string values;
  PutTag(kTensorDoubleVal, kLengthDelimited, &values);
  PutVarint(8, &values);
  PutFixed64(DoubleBits(value), &values);
  return ValueEvent(wall_time, step, tag, ScalarTensor(kDtDouble, values),
                    Metadata("scalars", kDataClassScalar));
}

std::string EncodeTextEvent(double wall_time, int64_t step, std::string_view tag,
                            std::string_view text) {
  std::string values;
  PutBytesField(kTensorStringVal, text, &values);
  return ValueEvent(wall_time, step, tag, ScalarTensor(kDtString, values),
                    Metadata("text", kDataClassTensor));
}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(
    const std::string& dir, const EventFileOptions& options) {
  if (dir.empty()) return absl::InvalidArgumentError("a TensorBoard log directory is needed");
  if (int err = MakeDirs(dir); err != 0) {
    return absl::ErrnoToStatus(err, absl::StrCat("cannot create ", dir));
  }
  const double now =
      options.wall_time >= 0 ? options.wall_time : absl::ToUnixMicros(absl::Now()) / 1e6;
  const std::string path =
      absl::StrCat(dir, "/events.out.tfevents.", static_cast<int64_t>(now), ".", HostName(), ".",
                   ::getpid(), ".", file_counter.fetch_add(1), ".", options.suffix);
  std::FILE* file = std::fopen(path.c_str(), "wbx");  // x: never append to someone else's file.
  if (file == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
  std::unique_ptr<EventFileWriter> writer(new EventFileWriter(path, file, options.wall_time));
  if (absl::Status s = writer->Append(EncodeFileVersionEvent(now)); !s.ok()) return s;
  if (absl::Status s = writer->Flush(); !s.ok()) return s;
  return writer;
}

EventFileWriter::EventFileWriter(std::string path, std::FILE* file, double wall_time)
    : path_(std::move(path)), wall_time_(wall_time), file_(file) {}

EventFileWriter::~EventFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

double EventFileWriter::WallTime() const {
  return wall_time_ >= 0 ? wall_time_ : absl::ToUnixMicros(absl::Now()) / 1e6;
}

absl::Status EventFileWriter::Append(const std::string& event) {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  const std::string record = FrameRecord(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", path_));
  }
  ++events_;
  return absl::OkStatus();
}

absl::Status EventFileWriter::AddScalar(std::string_view tag, int64_t step, double value) {
  return Append(EncodeScalarEvent(WallTime(), step, tag, value));
}

absl::Status EventFileWriter::AddText(std::string_view tag, int64_t step, std::string_view text) {
  return Append(EncodeTextEvent(WallTime(), step, tag, text));
}

absl::Status EventFileWriter::Flush() {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  if (std::fflush(file_) != 0)
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", path_));
  return absl::OkStatus();
}

absl::Status EventFileWriter::Close() {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  const int flushed = std::fflush(file_) == 0 ? 0 : errno;
  const int closed = std::fclose(file_) == 0 ? 0 : errno;
  file_ = nullptr;
  if (flushed != 0 || closed != 0) {
    return absl::ErrnoToStatus(flushed != 0 ? flushed : closed,
                               absl::StrCat("cannot write ", path_));
  }
  return absl::OkStatus();
}

}  // namespace tracetorch::tensorboard
