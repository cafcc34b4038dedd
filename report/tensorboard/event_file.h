// TensorBoard event files, written without TensorFlow: the Event and Summary protobuf messages
// (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto) encoded by hand, each
// framed as a TFRecord:
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes | the bytes |
//   uint32 masked CRC-32C of the bytes
// A file starts with an Event whose file_version is "brain.Event:2".
//
// Scalars are written the way tf.summary.scalar writes them in TF 2 (a tensor value with the
// "scalars" plugin's metadata), but as a DT_DOUBLE tensor, so that TensorBoard's reader gives back
// exactly the double that was written (a legacy simple_value would be rounded to float32). Text is
// a DT_STRING scalar tensor with the "text" plugin's metadata (rendered as Markdown).
//
// Example:
//   absl::StatusOr<std::unique_ptr<EventFileWriter>> w = EventFileWriter::Create("runs/a", {});
//   if (!w.ok()) return w.status();
//   (*w)->AddScalar("layers/fc/latency_ms", /*step=*/3, 0.042);
//   absl::Status s = (*w)->Close();
//
// Thread-compatible: one writer per thread (the daemon's exporter calls it from one thread).
#ifndef TRACETORCH_REPORT_TENSORBOARD_EVENT_FILE_H_
#define TRACETORCH_REPORT_TENSORBOARD_EVENT_FILE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tracetorch::tensorboard {

// One TFRecord holding `payload`.
std::string FrameRecord(std::string_view payload);

// Serialized Event messages (not framed).
std::string EncodeFileVersionEvent(double wall_time);
std::string EncodeScalarEvent(double wall_time, int64_t step, std::string_view tag, double value);
std::string EncodeTextEvent(double wall_time, int64_t step, std::string_view tag,
                            std::string_view text);

struct EventFileOptions {
  // The file name's last part: events.out.tfevents.<seconds>.<host>.<pid>.<n>.<suffix>.
  std::string suffix = "tracetorch";
  // Wall time stamped on every event (seconds since the epoch); negative: the time of each call.
  double wall_time = -1;
};

class EventFileWriter {
 public:
  // Creates `dir` (and its parents, mode 0755) when missing and a new event file in it, with the
  // file_version record written. InvalidArgument for an empty dir; the errno's code (NotFound,
  // PermissionDenied, ...) with the path otherwise.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(const std::string& dir,
                                                                 const EventFileOptions& options);
  ~EventFileWriter();  // Closes the file (errors are lost: call Close() to see them).
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // Append one event (buffered). A non-finite `value` is written as it is (TensorBoard shows NaN);
  // callers skip values that were not measured. Errors: the write's errno, with the path.
  absl::Status AddScalar(std::string_view tag, int64_t step, double value);
  absl::Status AddText(std::string_view tag, int64_t step, std::string_view text);
  // Makes what was added visible to a reader (TensorBoard polls the file).
  absl::Status Flush();
  // Flushes and closes; later calls fail with FailedPrecondition.
  absl::Status Close();

  const std::string& path() const { return path_; }
  uint64_t events_written() const { return events_; }

 private:
  EventFileWriter(std::string path, std::FILE* file, double wall_time);
  absl::Status Append(const std::string& event);
  double WallTime() const;

  const std::string path_;
  const double wall_time_;
  std::FILE* file_;
  uint64_t events_ = 0;
};

}  // namespace tracetorch::tensorboard

#endif  // TRACETORCH_REPORT_TENSORBOARD_EVENT_FILE_H_
