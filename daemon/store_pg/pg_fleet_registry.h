// The fleet registry (daemon/core/fleet_registry.h) in the PostgreSQL database of the daemons'
// baselines: table tracetorch_job_ranks (pg_schema.h, version 2), one row per session of a job,
// upserted by the daemon that holds it and read by job id (indexed).
//
// Failures: Unavailable while the server is away (naming it, never a password); the next call
// reconnects. Thread-safe: calls are serialised on one connection by a mutex.
#ifndef TRACETORCH_DAEMON_STORE_PG_PG_FLEET_REGISTRY_H_
#define TRACETORCH_DAEMON_STORE_PG_PG_FLEET_REGISTRY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/fleet_registry.h"
#include "daemon/store_pg/pg_connection.h"

namespace tracetorch::daemon {

class PgFleetRegistry final : public FleetRegistry {
 public:
  // Connects and creates or migrates the schema (as PgBaselineStore::Open).
  static absl::StatusOr<std::unique_ptr<PgFleetRegistry>> Open(const std::string& url);

  absl::Status Publish(const std::vector<FleetRank>& ranks) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<FleetRank>> Job(std::string_view job_id) const override
      ABSL_LOCKS_EXCLUDED(mu_);
  std::string Describe() const override;

 private:
  explicit PgFleetRegistry(std::unique_ptr<PgConnection> conn)
      : where_(conn->where()), conn_(std::move(conn)) {}

  const std::string where_;
  mutable absl::Mutex mu_;
  const std::unique_ptr<PgConnection> conn_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_STORE_PG_PG_FLEET_REGISTRY_H_
