// The fleet registry: where a job's ranks are when they run on many nodes. Daemons that share a
// fleet store (tracetorchd --store postgresql://..., the database their baselines use) register
// their sessions of jobs there, so that one query finds every rank of a job and the daemon that
// holds it (`tracetorch forensics --job J --remote ANY_DAEMON`), where a job of a thousand ranks
// cannot be typed as an address list.
//
// FleetRegistry is the store's contract (daemon/store_pg/pg_fleet_registry.h implements it);
// FleetPublisher is what a daemon runs to keep its rows current. A row holds the session's
// tracetorch.v1.SessionInfo (its state and flight status: position, stall, exit, NaN origin) as
// bytes, so that this header carries no protobuf types.
//
// Thread-safety: implementations are thread-safe; FleetPublisher is thread-compatible (the
// daemon's publisher thread).
#ifndef TRACETORCH_DAEMON_CORE_FLEET_REGISTRY_H_
#define TRACETORCH_DAEMON_CORE_FLEET_REGISTRY_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/core/session_manager.h"

namespace tracetorch::daemon {

struct FleetRank {
  std::string session_id;
  std::string job_id;
  std::string daemon;                      // The address tools reach the daemon at (--advertise).
  std::string session_info;                // A serialized tracetorch.v1.SessionInfo.
  absl::Time seen = absl::InfinitePast();  // When the daemon last wrote it.
};

class FleetRegistry {
 public:
  virtual ~FleetRegistry() = default;
  // Inserts or replaces these rows (keyed by session id), in one transaction. Unavailable when
  // the store is away.
  virtual absl::Status Publish(const std::vector<FleetRank>& ranks) = 0;
  // Every row of `job_id` (any order). Unavailable when the store is away.
  virtual absl::StatusOr<std::vector<FleetRank>> Job(std::string_view job_id) const = 0;
  // "postgresql host=... dbname=...", for messages.
  virtual std::string Describe() const = 0;
};

class FleetPublisher {
 public:
  // Neither pointer owned; both must outlive the publisher. `daemon` is the address this daemon
  // advertises.
  FleetPublisher(FleetRegistry* registry, const SessionManager* manager, std::string daemon);

  // Publishes, in one Publish, every session of a job whose SessionInfo changed since it was last
  // published (a live session's position and counts change often; an ended one once more, then
  // never). Rows are rewritten at least every `refresh` even when unchanged, so `seen` says the
  // daemon is alive. On an error nothing is marked published: the next call sends it again.
  absl::Status PublishChanges(absl::Time now, absl::Duration refresh = absl::Seconds(10));

 private:
  FleetRegistry* const registry_;
  const SessionManager* const manager_;
  const std::string daemon_;
  struct Published {
    std::string info;
    absl::Time at;
  };
  absl::flat_hash_map<std::string, Published> published_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_FLEET_REGISTRY_H_
