#include "daemon/core/data_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "trace/atomic_file.h"

namespace tracetorch::daemon {
namespace {

absl::Status ErrnoStatus(absl::string_view what, int err) {
  return absl::Status(err == EACCES || err == EPERM || err == EROFS
                          ? absl::StatusCode::kPermissionDenied
                          : absl::StatusCode::kInternal,
                      absl::StrCat(what, ": ", std::strerror(err)));
}

}  // namespace

absl::Status MakeDataDirectory(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty data directory path");
  std::string prefix;
  size_t pos = 0;
  while (pos != std::string::npos) {
    const size_t next = path.find('/', pos + 1);
    prefix = path.substr(0, next);
    pos = next;
    if (prefix.empty() || prefix == "/") continue;
    struct stat st;
    if (stat(prefix.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return absl::FailedPreconditionError(
            absl::StrCat(prefix, " exists and is not a directory"));
      }
      continue;
    }
    // 0700 first, then the mode asked for: never more open than 0750, whatever the umask.
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoStatus(absl::StrCat("cannot create directory ", prefix), errno);
    }
    if (chmod(prefix.c_str(), kDataDirMode) != 0) {
      return ErrnoStatus(absl::StrCat("cannot give mode 0750 to ", prefix), errno);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(const std::string& dir) {
  if (absl::Status s = MakeDataDirectory(dir); !s.ok()) return s;
  const std::string path = absl::StrCat(dir, "/lock");
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(absl::StrCat("cannot open ", path), errno);
  if (fchmod(fd, kDataFileMode) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(absl::StrCat("cannot give mode 0640 to ", path), err);
  }
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EINTR) continue;
    std::string holder;
    if (err == EWOULDBLOCK) {
      char buf[32] = {};
      const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
      int pid = 0;
      if (n > 0 && absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(buf)), &pid)) {
        holder = absl::StrCat(" (pid ", pid, ")");
      }
    }
    close(fd);
    if (err != EWOULDBLOCK) return ErrnoStatus(absl::StrCat("cannot lock ", path), err);
    return absl::FailedPreconditionError(
        absl::StrCat("another tracetorchd", holder, " is using the data directory ", dir,
                     "; stop it first or choose another --data-dir"));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(absl::StrCat("cannot write ", path), err);
  }
  return std::unique_ptr<DataDirLock>(new DataDirLock(fd));
}

DataDirLock::~DataDirLock() { close(fd_); }

int RemoveLeftoverTemps(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsAtomicWriteTemp(name) && it->is_regular_file(ec) && unlink(it->path().c_str()) == 0) {
      ++removed;
    }
  }
  return removed;
}

}  // namespace tracetorch::daemon
