// Test-only pause points that let a crash test SIGKILL tracetorchd at an exact place (before its
// first snapshot, mid-snapshot, between a snapshot and the index, during an index write) instead
// of hoping a random kill lands there.
//
// When the environment variable TRACETORCHD_TEST_PAUSE is "<point>:<n>:<marker path>", the n-th
// call (1-based, counted per process) of CrashPoint(<point>) creates the marker file and blocks
// the calling thread for ever; the test waits for the marker (a handshake, no sleep) and kills the
// daemon. Any other call returns at once. Unset or malformed (production): CrashPoint reads the
// environment once, on its first call, and is one relaxed atomic load afterwards.
//
// Points: "snapshot" (Session::WriteSnapshot: the record is taken, nothing written yet),
// "snapshot-written" (SessionManager: a snapshot file is in place, the index does not know yet),
// "index" (SessionManager::WriteIndex: the index is encoded, not yet written), "end"
// (IngestConnection: an agent's End is applied, its final snapshot not yet written).
//
// Thread-safe.
#ifndef TRACETORCH_DAEMON_CORE_CRASH_POINT_H_
#define TRACETORCH_DAEMON_CORE_CRASH_POINT_H_

#include <string_view>

namespace tracetorch::daemon {

inline constexpr char kCrashPointEnv[] = "TRACETORCHD_TEST_PAUSE";

void CrashPoint(std::string_view point);

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_CRASH_POINT_H_
