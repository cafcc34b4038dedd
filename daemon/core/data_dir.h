// The daemon's data directory (DATA_DIR, --data-dir) as the file system sees it: who holds it, and
// the modes of what the daemon creates in it.
//
// One tracetorchd per data directory: DataDirLock takes an exclusive flock(2) on DATA_DIR/lock for
// the daemon's lifetime (the kernel drops it when the process ends, however it ends), so a second
// daemon started on the same directory refuses instead of overwriting the first one's index.
//
// Modes: files the daemon writes are 0640 (kDataFileMode) and directories it creates 0750
// (kDataDirMode), whatever the umask; a directory that already exists keeps its mode (the
// operator's choice).
//
// Thread-compatible.
#ifndef TRACETORCH_DAEMON_CORE_DATA_DIR_H_
#define TRACETORCH_DAEMON_CORE_DATA_DIR_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tracetorch::daemon {

inline constexpr mode_t kDataFileMode = 0640;
inline constexpr mode_t kDataDirMode = 0750;

// Creates `path` and its missing parents, each with mode 0750. OK when it exists as a directory;
// PermissionDenied or Internal (naming the directory and errno's text) otherwise.
absl::Status MakeDataDirectory(const std::string& path);

class DataDirLock {
 public:
  // Creates `dir` (MakeDataDirectory) and locks DATA_DIR/lock (mode 0640), writing this process's
  // pid into it. FailedPrecondition when another process holds it: "another tracetorchd (pid N) is
  // using the data directory DIR; stop it first or choose another --data-dir".
  static absl::StatusOr<std::unique_ptr<DataDirLock>> Acquire(const std::string& dir);
  ~DataDirLock();  // Releases the lock.
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  const int fd_;
};

// Removes the temporary files an interrupted WriteFileAtomic left directly in `dir`
// (IsAtomicWriteTemp); returns how many it removed. Only for a directory this process holds the
// DataDirLock of (nobody else writes there then).
int RemoveLeftoverTemps(const std::string& dir);

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_DATA_DIR_H_
