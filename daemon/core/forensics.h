// Forensic bundles: what tracetorchd keeps when a session ends uncleanly (aborted), stalls, or
// first sees a NaN/Inf — the session as it was then (its SessionInfo with the flight status and
// the exit, its record: the final snapshot, with the op graph when it kept one), the per-step
// history of the layers around the position and the NaN origin, the flight recorder's ring and
// the latest step times, and the thread stacks when they were taken. A bundle is a
// tracetorch.v1.ForensicBundle (service.proto); this header passes it as its serialized bytes so
// that the core's headers stay free of protobuf types.
//
// On disk: DATA_DIR/sessions/<id>.forensics.json, a tracetorch.v1.ForensicsResponse in protobuf
// JSON (every bundle of the session, oldest first), rewritten atomically (mode 0640) when one is
// added.
//
// Thread-safe: pure functions and file I/O.
#ifndef TRACETORCH_DAEMON_CORE_FORENSICS_H_
#define TRACETORCH_DAEMON_CORE_FORENSICS_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/core/session.h"
#include "daemon/core/stack_capture.h"
#include "flight/reader.h"

namespace tracetorch::daemon {

struct BundleInputs {
  std::string reason;  // "aborted", "stalled", "nan", "now"
  absl::Time written = absl::InfinitePast();
  const Session* session = nullptr;            // Required.
  const flight::RegionView* region = nullptr;  // The recorder's content, when there is one.
  std::vector<ThreadStacksResult> stacks;
  // Layers kept with their history on each side of the position's layer (in the record's order),
  // besides the NaN origin's and those with a non-finite span in the ring.
  size_t history_layers = 8;
};

// A serialized tracetorch.v1.ForensicBundle.
std::string BuildBundle(const BundleInputs& inputs);

// The bundle file of `session_id` under `data_dir` (empty: none).
std::string BundlePath(std::string_view data_dir, std::string_view session_id);
// Writes every bundle (serialized, oldest first) of a session to its file, atomically.
absl::Status WriteBundles(const std::string& path, std::string_view session_id,
                          const std::vector<std::string>& bundles);
// The bundles of a file WriteBundles wrote. NotFound when there is none; InvalidArgument when it
// does not parse.
absl::StatusOr<std::vector<std::string>> ReadBundles(const std::string& path);

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_FORENSICS_H_
