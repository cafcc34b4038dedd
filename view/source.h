// Trace files for the CLI: loading one with a one-line error (inspect, summary, diff, and the
// uploads of diff --remote and baseline set), and the TraceSource that `watch FILE` polls. A
// daemon session is not a TraceSource: `watch --remote` follows its Watch stream
// (remote_watch.h), and both feed the same renderers.
#ifndef TRACETORCH_VIEW_SOURCE_H_
#define TRACETORCH_VIEW_SOURCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trace/record.h"

namespace tracetorch::view {

// One line describing why `path` could not be loaded, without a "tracetorch: " prefix, e.g.
//   "nope.json: file not found"
//   "bad.json: line 3, column 17: expected ',' or '}'"
// Newlines in the status message are folded into spaces.
std::string DescribeLoadError(const std::string& path, const absl::Status& status);

// Reads and parses a trace file (ReadTraceFile). Errors carry the canonical code of ReadTraceFile
// and the DescribeLoadError text as message.
absl::StatusOr<TraceRecord> LoadTraceFile(const std::string& path);

// LoadTraceFile of each of `paths`, one after the other (ReadTraceFiles: one read buffer for all).
std::vector<absl::StatusOr<TraceRecord>> LoadTraceFiles(absl::Span<const std::string> paths);

// The result of polling a source.
struct SourcePoll {
  enum class State {
    kUnchanged,  // Nothing new since the previous poll.
    kUpdated,    // `record` holds a new version.
    kMissing,    // Nothing to show yet (file absent); `message` says what is awaited.
    kInvalid,    // The current version cannot be used; `message` says why (one line).
  };
  State state = State::kUnchanged;
  TraceRecord record;
  std::string message;
};

// A source of successive versions of one trace.
// Not thread-safe: one watcher polls it.
class TraceSource {
 public:
  virtual ~TraceSource() = default;
  // Checks for a new version. Never blocks for long; errors are reported in the result.
  virtual SourcePoll Poll() = 0;
};

// Watches a trace file by path. A version is identified by (device, inode, size, mtime), so a file
// replaced by rename is seen as new even when size and mtime match. While the file is missing or
// invalid, every poll looks again (kMissing / kInvalid); once a version has loaded, polls return
// kUnchanged until the identity changes.
class FileTraceSource : public TraceSource {
 public:
  explicit FileTraceSource(std::string path);
  SourcePoll Poll() override;

 private:
  struct FileIdentity {
    uint64_t device = 0;
    uint64_t inode = 0;
    int64_t size = 0;
    int64_t mtime_ns = 0;
    friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
  };

  const std::string path_;
  std::optional<FileIdentity> loaded_;  // Identity of the version last returned as kUpdated.
};

}  // namespace tracetorch::view

#endif  // TRACETORCH_VIEW_SOURCE_H_
