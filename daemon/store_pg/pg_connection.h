// One libpq connection to a PostgreSQL server, with the error mapping the stores use. No
// exceptions: every failure is an absl::Status.
//
// Errors: Unavailable when the server cannot be reached or the connection broke (the message says
// where, never a password, and libpq's reason); InvalidArgument for a malformed connection string;
// a failed statement is mapped from its SQLSTATE (connection and shutdown classes: Unavailable;
// serialization failures and deadlocks: Aborted; anything else: Internal with the server's
// message).
//
// Thread-compatible: one thread at a time (PgBaselineStore holds it under its mutex).
#ifndef TRACETORCH_DAEMON_STORE_PG_PG_CONNECTION_H_
#define TRACETORCH_DAEMON_STORE_PG_PG_CONNECTION_H_

#include <libpq-fe.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tracetorch::daemon {

// A statement's result (rows of a SELECT, or the count of a DELETE/UPDATE).
class PgResult {
 public:
  explicit PgResult(PGresult* r) : r_(r, &PQclear) {}
  int rows() const { return PQntuples(r_.get()); }
  bool null(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }
  // The field's bytes: text for a text-format result, raw bytes in a binary-format one.
  std::string bytes(int row, int col) const {
    return std::string(PQgetvalue(r_.get(), row, col),
                       static_cast<size_t>(PQgetlength(r_.get(), row, col)));
  }
  // Rows an INSERT/UPDATE/DELETE touched.
  int64_t affected() const;

 private:
  std::unique_ptr<PGresult, decltype(&PQclear)> r_;
};

// A statement parameter: text, raw bytes (bytea, sent in binary), or NULL.
struct PgParam {
  static PgParam Text(std::string s) { return PgParam{std::move(s), false}; }
  static PgParam Bytes(std::string s) { return PgParam{std::move(s), true}; }
  std::optional<std::string> value;
  bool binary = false;
};

class PgConnection {
 public:
  // Connects. `conninfo`: a postgresql:// URI or "key=value ..." (libpq's syntax).
  static absl::StatusOr<std::unique_ptr<PgConnection>> Open(
      const std::string& conninfo, absl::Duration connect_timeout = absl::Seconds(3));
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs one statement. `binary_result`: fields come back as raw bytes (for bytea). A statement
  // that fails because the connection broke is run once more on a fresh connection when
  // `idempotent` (every statement of the stores is); if the server is still away the error is
  // Unavailable.
  absl::StatusOr<PgResult> Exec(absl::string_view sql, const std::vector<PgParam>& params = {},
                                bool binary_result = false, bool idempotent = true);

  // "host=... port=... dbname=... user=..." of the server (no password).
  const std::string& where() const { return where_; }

 private:
  PgConnection(PGconn* conn, std::string where) : conn_(conn), where_(std::move(where)) {}
  absl::StatusOr<PgResult> ExecOnce(absl::string_view sql, const std::vector<PgParam>& params,
                                    bool binary_result);
  bool Broken() const { return PQstatus(conn_) != CONNECTION_OK; }
  absl::Status Unavailable(absl::string_view why) const;

  PGconn* conn_;
  const std::string where_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_STORE_PG_PG_CONNECTION_H_
