#include "view/source.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "trace/json.h"

namespace tracetorch::view {
namespace {

// tracetorch-ml's words, which its users know.
std::string WaitingFor(const std::string& path) {
  return absl::StrCat("Waiting for ", path, " to appear... (Ctrl+C to exit)");
}

}  // namespace

std::string DescribeLoadError(const std::string& path, const absl::Status& status) {
  std::string what;
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      what = "file not found";
      break;
    case absl::StatusCode::kPermissionDenied:
      what = "permission denied";
      break;
    default:
      what = std::string(status.message());
      // Callers add the path; drop it if the message already starts with it.
      if (absl::StartsWith(what, path) && what.size() > path.size() &&
          (what[path.size()] == ':' || what[path.size()] == ' ')) {
        what = std::string(absl::StripLeadingAsciiWhitespace(
            absl::StripPrefix(absl::string_view(what).substr(path.size()), ":")));
      }
      if (what.empty()) what = std::string(absl::StatusCodeToString(status.code()));
      break;
  }
  std::string line = absl::StrCat(path, ": ", what);
  absl::StrReplaceAll({{"\r\n", " "}, {"\n", " "}, {"\r", " "}}, &line);
  return line;
}

absl::StatusOr<TraceRecord> LoadTraceFile(const std::string& path) {
  std::vector<absl::StatusOr<TraceRecord>> records = LoadTraceFiles({path});
  return std::move(records.front());
}

std::vector<absl::StatusOr<TraceRecord>> LoadTraceFiles(absl::Span<const std::string> paths) {
  std::vector<absl::StatusOr<TraceRecord>> records = ReadTraceFiles(paths);
  for (size_t i = 0; i < records.size(); ++i) {
    if (!records[i].ok()) {
      records[i] = absl::Status(records[i].status().code(),
                                DescribeLoadError(paths[i], records[i].status()));
    }
  }
  return records;
}

FileTraceSource::FileTraceSource(std::string path) : path_(std::move(path)) {}

SourcePoll FileTraceSource::Poll() {
  SourcePoll poll;
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) {
    const int error = errno;
    loaded_.reset();  // Whatever appears next is new.
    if (error == ENOENT || error == ENOTDIR) {
      poll.state = SourcePoll::State::kMissing;
      poll.message = WaitingFor(path_);
    } else {
      poll.state = SourcePoll::State::kInvalid;
      poll.message = absl::StrCat(path_, ": ", std::strerror(error));
    }
    return poll;
  }
  const FileIdentity identity{
      .device = static_cast<uint64_t>(st.st_dev),
      .inode = static_cast<uint64_t>(st.st_ino),
      .size = static_cast<int64_t>(st.st_size),
      .mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
  };
  if (loaded_.has_value() && *loaded_ == identity) return poll;  // kUnchanged.

  absl::StatusOr<TraceRecord> record = LoadTraceFile(path_);
  if (!record.ok()) {
    loaded_.reset();
    poll.state = record.status().code() == absl::StatusCode::kNotFound
                     ? SourcePoll::State::kMissing
                     : SourcePoll::State::kInvalid;
    poll.message = poll.state == SourcePoll::State::kMissing
                       ? WaitingFor(path_)
                       : std::string(record.status().message());
    return poll;
  }
  loaded_ = identity;
  poll.state = SourcePoll::State::kUpdated;
  poll.record = *std::move(record);
  return poll;
}

}  // namespace tracetorch::view
