#include "trace/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "trace/huge_pages.h"

namespace tracetorch {
namespace {

// Extra capacity reserved past the end of strings returned by ReadFileToString, so that a JSON
// parser that needs readable padding (simdjson needs 64 bytes) can use the buffer without copying
// it.
constexpr size_t kReadPadding = 64;

absl::StatusCode CodeForErrno(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::StatusCode::kNotFound;
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::StatusCode::kPermissionDenied;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
      return absl::StatusCode::kResourceExhausted;
    case EISDIR:
    case ENAMETOOLONG:
    case ELOOP:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

// "open(/a/b): No such file or directory"
absl::Status ErrnoError(std::string_view call, std::string_view path, int err) {
  return absl::Status(CodeForErrno(err),
                      absl::StrCat(absl::string_view(call.data(), call.size()), "(",
                                   absl::string_view(path.data(), path.size()),
                                   "): ", std::generic_category().message(err)));
}

// Closes a descriptor when it goes out of scope unless released.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now and returns close()'s errno (0 on success).
  int CloseNow() {
    const int fd = fd_;
    fd_ = -1;
    // close() must not be retried on EINTR on Linux: the descriptor is released either way.
    return ::close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

int FsyncRetrying(int fd) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

// Writes all of `data`, retrying on EINTR and short writes. Returns 0 or an errno.
int WriteAll(int fd, std::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;  // A regular file never accepts 0 bytes of a non-empty write.
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::atomic<uint64_t> temp_counter{0};

}  // namespace

absl::Status WriteFileAtomic(const std::string& path, std::string_view contents,
                             std::optional<mode_t> mode) {
  if (path.empty() || path.back() == '/') {
    return absl::InvalidArgumentError(absl::StrCat("not a file path: '", path, "'"));
  }
  const std::string dir = DirName(path);
  // Unique per process (pid) and per call (counter); O_EXCL guards against leftovers anyway.
  const std::string temp = absl::StrCat(dir, "/.", BaseName(path), ".tmp.", ::getpid(), ".",
                                        temp_counter.fetch_add(1, std::memory_order_relaxed));

  int fd;
  do {
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                mode.has_value() ? 0600 : 0666);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoError("open", temp, errno);
  FdCloser closer(fd);

  auto fail = [&](std::string_view call, const std::string& what, int err) {
    if (closer.get() >= 0) closer.CloseNow();
    ::unlink(temp.c_str());
    return ErrnoError(call, what, err);
  };

  // The mode asked for (umask or not), else the permissions of the file being replaced (open()
  // applied the umask to 0666 otherwise).
  struct stat old_st;
  if (mode.has_value()) {
    if (::fchmod(fd, *mode & 07777) != 0) return fail("fchmod", temp, errno);
  } else if (::stat(path.c_str(), &old_st) == 0 && S_ISREG(old_st.st_mode)) {
    if (::fchmod(fd, old_st.st_mode & 07777) != 0) return fail("fchmod", temp, errno);
  }
  if (int err = WriteAll(fd, contents); err != 0) return fail("write", temp, err);
  if (int err = FsyncRetrying(fd); err != 0) return fail("fsync", temp, err);
  if (int err = closer.CloseNow(); err != 0) return fail("close", temp, err);
  if (::rename(temp.c_str(), path.c_str()) != 0) return fail("rename", path, errno);

  // Make the rename itself durable. Some file systems do not support fsync on directories (EINVAL).
  int dir_fd;
  do {
    dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  } while (dir_fd < 0 && errno == EINTR);
  if (dir_fd < 0) return ErrnoError("open", dir, errno);
  FdCloser dir_closer(dir_fd);
  if (int err = FsyncRetrying(dir_fd); err != 0 && err != EINVAL && err != EROFS) {
    return ErrnoError("fsync", dir, err);
  }
  return absl::OkStatus();
}

bool IsAtomicWriteTemp(std::string_view file_name) {
  return file_name.size() > 1 && file_name[0] == '.' &&
         file_name.find(".tmp.") != std::string_view::npos;
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::string out;
  if (absl::Status s = ReadFileInto(path, &out); !s.ok()) return s;
  return out;
}

absl::Status ReadFileInto(const std::string& path, std::string* out) {
  out->clear();
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoError("open", path, errno);
  FdCloser closer(fd);

  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError("fstat", path, errno);
  if (S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, " is a directory"));

  // st_size is a hint (0 for /proc files, stale if the file grows): read until EOF regardless.
  const size_t capacity = st.st_size > 0 ? static_cast<size_t>(st.st_size) + 1 : 4096;
  // When the buffer must grow, an eighth to spare lets a slightly larger next file reuse it (the
  // spare is address space: pages past what is read are never touched).
  if (out->capacity() < capacity + kReadPadding) {
    out->reserve(capacity + capacity / 8 + kReadPadding);
    // Written whole just below: huge pages where the kernel allows (see huge_pages.h).
    trace_internal::AdviseHugePages(out->data(), capacity);
  }
  out->resize(capacity);
  size_t used = 0;
  while (true) {
    if (used == out->size()) out->resize(out->size() * 2);
    const ssize_t n = ::read(fd, out->data() + used, out->size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      out->clear();
      return ErrnoError("read", path, err);
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  out->reserve(used + kReadPadding);
  out->resize(used);
  return absl::OkStatus();
}

}  // namespace tracetorch
