#include "daemon/core/flight_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "flight/recorder.h"
#include "gtest/gtest.h"

namespace tracetorch::daemon {
namespace {

TEST(FlightRegion, AdoptsASealedRecorder) {
  std::unique_ptr<flight::Recorder> r = *flight::Recorder::Create();
  r->AddName(3, "net.fc");
  r->SetRecording(true, 5);
  r->Move(flight::Phase::kBackward, flight::Event::kEnter, 3, 9, 10);
  absl::StatusOr<std::shared_ptr<FlightRegion>> region = FlightRegion::Adopt(dup(r->fd()));
  ASSERT_TRUE(region.ok()) << region.status();
  r.reset();  // The agent is gone; the daemon's mapping still reads.
  absl::StatusOr<flight::PositionView> p = (*region)->Position();
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(flight::Describe(*p, (*region)->Names()), "step 9, backward, in net.fc");
}

TEST(FlightRegion, RefusesWhatIsNotASealedMemfdOfARegion) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[1]);
  EXPECT_EQ(FlightRegion::Adopt(fds[0]).status().code(), absl::StatusCode::kInvalidArgument);

  // A memfd nobody sealed: its owner could shrink it under the daemon's mapping.
  int fd = static_cast<int>(syscall(SYS_memfd_create, "x", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, flight::kRegionBytes), 0);
  EXPECT_EQ(FlightRegion::Adopt(fd).status().code(), absl::StatusCode::kInvalidArgument);

  // Sealed, but too small.
  fd = static_cast<int>(syscall(SYS_memfd_create, "y", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  EXPECT_EQ(FlightRegion::Adopt(fd).status().code(), absl::StatusCode::kInvalidArgument);

  // Sealed and large enough, but zeros: not a region.
  fd = static_cast<int>(syscall(SYS_memfd_create, "z", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_EQ(ftruncate(fd, flight::kRegionBytes), 0);
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_EQ(FlightRegion::Adopt(fd).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tracetorch::daemon
