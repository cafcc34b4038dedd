#include "daemon/store_pg/pg_fleet_registry.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/store_pg/pg_schema.h"

namespace tracetorch::daemon {

absl::StatusOr<std::unique_ptr<PgFleetRegistry>> PgFleetRegistry::Open(const std::string& url) {
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = PgConnection::Open(url);
  if (!conn.ok()) return conn.status();
  std::unique_ptr<PgFleetRegistry> registry(new PgFleetRegistry(*std::move(conn)));
  absl::MutexLock lock(&registry->mu_);
  if (absl::Status s = MigratePgSchema(*registry->conn_); !s.ok()) return s;
  return registry;
}

absl::Status PgFleetRegistry::Publish(const std::vector<FleetRank>& ranks) {
  absl::MutexLock lock(&mu_);
  if (auto r = conn_->Exec("BEGIN"); !r.ok()) return r.status();
  absl::Status status;
  for (const FleetRank& rank : ranks) {
    absl::StatusOr<PgResult> r = conn_->Exec(
        "INSERT INTO tracetorch_job_ranks (session_id, job_id, daemon, seen_unix_ns, info) "
        "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id) DO UPDATE SET "
        "job_id = EXCLUDED.job_id, daemon = EXCLUDED.daemon, "
        "seen_unix_ns = EXCLUDED.seen_unix_ns, info = EXCLUDED.info",
        {PgParam::Text(rank.session_id), PgParam::Text(rank.job_id), PgParam::Text(rank.daemon),
         PgParam::Text(absl::StrCat(absl::ToUnixNanos(rank.seen))),
         PgParam::Bytes(rank.session_info)},
        /*binary_result=*/false, /*idempotent=*/false);
    if (!r.ok()) {
      status = r.status();
      break;
    }
  }
  auto end = conn_->Exec(status.ok() ? "COMMIT" : "ROLLBACK", {}, false, /*idempotent=*/false);
  if (status.ok() && !end.ok()) return end.status();
  return status;
}

absl::StatusOr<std::vector<FleetRank>> PgFleetRegistry::Job(std::string_view job_id) const {
  absl::StatusOr<PgResult> r;
  {
    absl::MutexLock lock(&mu_);
    r = conn_->Exec(
        "SELECT session_id, daemon, seen_unix_ns::text, info FROM tracetorch_job_ranks "
        "WHERE job_id = $1",
        {PgParam::Text(std::string(job_id))}, /*binary_result=*/true);
  }
  if (!r.ok()) return r.status();
  std::vector<FleetRank> out;
  out.reserve(static_cast<size_t>(r->rows()));
  for (int i = 0; i < r->rows(); ++i) {
    FleetRank& rank = out.emplace_back();
    rank.session_id = r->bytes(i, 0);
    rank.job_id = std::string(job_id);
    rank.daemon = r->bytes(i, 1);
    int64_t seen = 0;
    if (absl::SimpleAtoi(r->bytes(i, 2), &seen)) rank.seen = absl::FromUnixNanos(seen);
    rank.session_info = r->bytes(i, 3);
  }
  return out;
}

std::string PgFleetRegistry::Describe() const {
  return absl::StrCat("fleet store postgresql ", where_);
}

}  // namespace tracetorch::daemon
