// The schema tracetorchd keeps in a PostgreSQL database (its baselines, pg_baseline_store.h, and
// its fleet registry, pg_fleet_registry.h): created and migrated by the daemon itself.
// `tracetorch_schema` holds the version; MigratePgSchema applies the migrations a database lacks
// in one transaction under an advisory lock, so daemons starting together migrate once, and
// refuses (FailedPrecondition) a database whose schema is newer than this daemon's.
//
//   1  tracetorch_baselines: one row per named baseline
//   2  tracetorch_job_ranks: one row per session of a job, per daemon (the fleet registry)
//
// Thread-compatible: one thread uses the connection.
#ifndef TRACETORCH_DAEMON_STORE_PG_PG_SCHEMA_H_
#define TRACETORCH_DAEMON_STORE_PG_PG_SCHEMA_H_

#include "absl/status/status.h"
#include "daemon/store_pg/pg_connection.h"

namespace tracetorch::daemon {

inline constexpr int kPgSchemaVersion = 2;

absl::Status MigratePgSchema(PgConnection& conn);

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_STORE_PG_PG_SCHEMA_H_
