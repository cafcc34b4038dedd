#include "daemon/store_pg/pg_schema.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tracetorch::daemon {
namespace {

// Any constant: the advisory lock that serialises migrations of one database.
constexpr absl::string_view kMigrationLock = "7171";

// Migration N (1-based) takes the schema from version N-1 to N: its statements, run in order (one
// statement each: libpq's PQexecParams runs one). Append; never edit.
const std::vector<std::vector<absl::string_view>>& Migrations() {
  static const auto* const migrations = new std::vector<std::vector<absl::string_view>>{
      {R"sql(CREATE TABLE tracetorch_baselines (
      name text PRIMARY KEY,
      created_unix_ns bigint NOT NULL,
      source text NOT NULL,
      model_name text NOT NULL,
      layers integer NOT NULL,
      has_history boolean NOT NULL,
      record_bytes bigint NOT NULL,
      record bytea NOT NULL,
      sidecar_bytes bigint NOT NULL,
      sidecar bytea NOT NULL))sql"},
      // 2: the fleet registry (pg_fleet_registry.h): every daemon's sessions of jobs.
      {R"sql(CREATE TABLE tracetorch_job_ranks (
      session_id text PRIMARY KEY,
      job_id text NOT NULL,
      daemon text NOT NULL,
      seen_unix_ns bigint NOT NULL,
      info bytea NOT NULL))sql",
       "CREATE INDEX tracetorch_job_ranks_job ON tracetorch_job_ranks (job_id)"},
  };
  return *migrations;
}

}  // namespace

absl::Status MigratePgSchema(PgConnection& connection) {
  if (Migrations().size() != static_cast<size_t>(kPgSchemaVersion)) {
    return absl::InternalError("tracetorchd's schema migrations do not match its version");
  }
  PgConnection* const conn = &connection;
  const std::string& where_ = connection.where();
  if (auto r = conn->Exec("BEGIN"); !r.ok()) return r.status();
  auto in_transaction = [&]() -> absl::Status {
    auto exec = [&](absl::string_view sql) {
      return conn->Exec(sql, {}, /*binary_result=*/false, /*idempotent=*/false);
    };
    if (auto r = exec(absl::StrCat("SELECT pg_advisory_xact_lock(", kMigrationLock, ")")); !r.ok())
      return r.status();
    if (auto r = exec("CREATE TABLE IF NOT EXISTS tracetorch_schema (version integer NOT NULL)");
        !r.ok())
      return r.status();
    absl::StatusOr<PgResult> current = exec("SELECT max(version) FROM tracetorch_schema");
    if (!current.ok()) return current.status();
    int version = 0;
    if (current->rows() == 1 && !current->null(0, 0) &&
        !absl::SimpleAtoi(current->bytes(0, 0), &version)) {
      return absl::InternalError(absl::StrCat("PostgreSQL store (", where_,
                                              "): unreadable schema version '",
                                              current->bytes(0, 0), "'"));
    }
    if (version > kPgSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "PostgreSQL store (", where_, ") has schema version ", version,
          "; this tracetorchd knows versions up to ", kPgSchemaVersion, " (upgrade it)"));
    }
    for (int v = version + 1; v <= kPgSchemaVersion; ++v) {
      for (absl::string_view statement : Migrations()[static_cast<size_t>(v - 1)]) {
        if (auto r = exec(statement); !r.ok()) return r.status();
      }
    }
    if (version < kPgSchemaVersion) {
      if (auto r = exec("DELETE FROM tracetorch_schema"); !r.ok()) return r.status();
      if (auto r =
              exec(absl::StrCat("INSERT INTO tracetorch_schema VALUES (", kPgSchemaVersion, ")"));
          !r.ok())
        return r.status();
    }
    return absl::OkStatus();
  };
  absl::Status s = in_transaction();
  auto end = conn->Exec(s.ok() ? "COMMIT" : "ROLLBACK", {}, false, /*idempotent=*/false);
  if (s.ok() && !end.ok()) return end.status();
  return s;
}

}  // namespace tracetorch::daemon
