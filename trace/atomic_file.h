// Crash- and reader-safe file replacement.
//
// WriteFileAtomic writes `contents` to a temporary file in the same directory as `path`, fsyncs it,
// renames it over `path` and fsyncs the directory. A process reading `path` concurrently sees
// either the previous complete file or the new complete file, never a partial one; after a crash
// `path` holds one of the two. The temporary file is removed on any failure (a crash can leave one
// behind: it is named ".<name>.tmp.<pid>.<n>", see IsAtomicWriteTemp).
//
// Thread-safe: concurrent writers to the same path each produce a complete file (last rename wins).
#ifndef TRACETORCH_TRACE_ATOMIC_FILE_H_
#define TRACETORCH_TRACE_ATOMIC_FILE_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tracetorch {

// Errors: NotFound if the directory does not exist, PermissionDenied, or Internal/ResourceExhausted
// (disk full) with the failing system call and errno text.
//
// The file's mode: `mode` when given, whatever the umask (the temporary file is created 0600 and
// given `mode` before anything is written to it); otherwise the mode of the file it replaces, or
// 0666 less the umask for a new file.
absl::Status WriteFileAtomic(const std::string& path, std::string_view contents,
                             std::optional<mode_t> mode = std::nullopt);

// Whether `file_name` (no directory) is a temporary file WriteFileAtomic makes, e.g. one a crash
// left behind.
bool IsAtomicWriteTemp(std::string_view file_name);

// Reads a whole file. NotFound, PermissionDenied, or InvalidArgument if `path` is a directory.
// The string has at least 64 bytes of capacity past its end (what simdjson needs to parse in
// place).
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// ReadFileToString into `*out`, reusing its capacity (no new memory when the file fits what an
// earlier read left there). On error `*out` is left empty, its capacity kept.
absl::Status ReadFileInto(const std::string& path, std::string* out);

}  // namespace tracetorch

#endif  // TRACETORCH_TRACE_ATOMIC_FILE_H_
