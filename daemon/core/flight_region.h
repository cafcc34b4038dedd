// An agent's flight recorder region (flight/layout.h) as the daemon holds it: the memfd the agent
// passed with its Hello (SCM_RIGHTS), checked and mapped read-only. The mapping stays valid after
// the agent's process died (the daemon keeps the memory alive), so the last position and the ring
// can be read then.
//
// The descriptor comes from another, possibly hostile, process. Adopt() accepts it only when it is
// a memfd sealed against shrinking (F_SEAL_SHRINK: nobody can cut the mapping short under the
// reader, so no read ever faults) of at least flight::kRegionBytes; the content is checked on
// every read (flight/reader.h).
//
// Thread-safe: reads only.
#ifndef TRACETORCH_DAEMON_CORE_FLIGHT_REGION_H_
#define TRACETORCH_DAEMON_CORE_FLIGHT_REGION_H_

#include <cstddef>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "flight/reader.h"

namespace tracetorch::daemon {

class FlightRegion {
 public:
  // Takes ownership of `fd` (closed on every path). InvalidArgument when it is not a sealed memfd
  // of the region's size, or does not hold a region of a layout this daemon reads; Internal when
  // it cannot be mapped.
  static absl::StatusOr<std::shared_ptr<FlightRegion>> Adopt(int fd);
  ~FlightRegion();
  FlightRegion(const FlightRegion&) = delete;
  FlightRegion& operator=(const FlightRegion&) = delete;

  absl::StatusOr<flight::PositionView> Position() const;
  absl::StatusOr<flight::RegionView> Read() const;
  // The name table only (cheap next to Read()).
  absl::flat_hash_map<int32_t, std::string> Names() const;

 private:
  FlightRegion(const void* base, size_t size);

  const void* const base_;
  const size_t size_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_FLIGHT_REGION_H_
