#include "daemon/core/flight_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "flight/layout.h"

namespace tracetorch::daemon {

absl::StatusOr<std::shared_ptr<FlightRegion>> FlightRegion::Adopt(int fd) {
  struct Closer {
    int fd;
    ~Closer() { close(fd); }  // The mapping keeps the memory; the descriptor is not needed.
  } closer{fd};
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return absl::InvalidArgumentError(
        "the flight recorder is not a memfd sealed against shrinking");
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) < flight::kRegionBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the flight recorder holds fewer than ", flight::kRegionBytes, " bytes"));
  }
  void* base = mmap(nullptr, flight::kRegionBytes, PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    return absl::InternalError(
        absl::StrCat("cannot map the flight recorder: ", std::strerror(errno)));
  }
  std::shared_ptr<FlightRegion> region(new FlightRegion(base, flight::kRegionBytes));
  if (absl::Status s = region->Position().status(); !s.ok() && !absl::IsUnavailable(s)) return s;
  return region;
}

FlightRegion::FlightRegion(const void* base, size_t size) : base_(base), size_(size) {}

FlightRegion::~FlightRegion() { munmap(const_cast<void*>(base_), size_); }

absl::StatusOr<flight::PositionView> FlightRegion::Position() const {
  return flight::ReadPosition(base_, size_);
}

absl::StatusOr<flight::RegionView> FlightRegion::Read() const {
  return flight::ReadRegion(base_, size_);
}

absl::flat_hash_map<int32_t, std::string> FlightRegion::Names() const {
  return flight::ReadNames(base_, size_);
}

}  // namespace tracetorch::daemon
