#include "daemon/store_pg/pg_connection.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tracetorch::daemon {
namespace {

// libpq's messages end with a newline and may span lines ("...failed: No such file\n\tIs the
// server running...?"): one line for logs and gRPC statuses.
std::string Trimmed(absl::string_view text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    if (!out.empty()) out += " ";
    out += std::string(absl::StripAsciiWhitespace(line));
  }
  return out;
}

// Where the connection string points, from libpq's own parse of it (no password).
absl::StatusOr<std::string> WhereOf(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    std::string why = error == nullptr ? std::string() : Trimmed(error);
    PQfreemem(error);
    return absl::InvalidArgumentError(
        absl::StrCat("bad PostgreSQL connection string: ", why.empty() ? "out of memory" : why));
  }
  std::vector<std::string> parts;
  for (const char* key : {"host", "port", "dbname", "user"}) {
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
      if (o->val != nullptr && *o->val != '\0' && absl::string_view(o->keyword) == key) {
        parts.push_back(absl::StrCat(key, "=", o->val));
      }
    }
  }
  PQconninfoFree(options);
  return parts.empty() ? std::string("(libpq defaults)") : absl::StrJoin(parts, " ");
}

}  // namespace

int64_t PgResult::affected() const {
  int64_t n = 0;
  return absl::SimpleAtoi(PQcmdTuples(r_.get()), &n) ? n : 0;
}

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnection::Open(const std::string& conninfo,
                                                                 absl::Duration connect_timeout) {
  absl::StatusOr<std::string> where = WhereOf(conninfo);
  if (!where.ok()) return where.status();
  // The caller's string comes last, so that what it says (its own connect_timeout) wins.
  const std::string timeout =
      absl::StrCat(std::max<int64_t>(1, absl::ToInt64Seconds(connect_timeout)));
  // The server's NOTICEs ("relation already exists, skipping") are not for the daemon's log.
  const char* keys[] = {"connect_timeout", "application_name", "options", "dbname", nullptr};
  const char* values[] = {timeout.c_str(), "tracetorchd", "-c client_min_messages=warning",
                          conninfo.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return absl::ResourceExhaustedError("libpq: out of memory");
  std::unique_ptr<PgConnection> c(new PgConnection(conn, *std::move(where)));
  if (c->Broken()) return c->Unavailable(PQerrorMessage(conn));
  return c;
}

PgConnection::~PgConnection() { PQfinish(conn_); }

absl::Status PgConnection::Unavailable(absl::string_view why) const {
  return absl::UnavailableError(
      absl::StrCat("PostgreSQL store (", where_, ") unavailable: ", Trimmed(why)));
}

absl::StatusOr<PgResult> PgConnection::Exec(absl::string_view sql,
                                            const std::vector<PgParam>& params, bool binary_result,
                                            bool idempotent) {
  if (Broken()) {
    PQreset(conn_);
    if (Broken()) return Unavailable(PQerrorMessage(conn_));
  }
  absl::StatusOr<PgResult> r = ExecOnce(sql, params, binary_result);
  if (r.ok() || !Broken() || !idempotent) return r;
  // The server went away under this statement (a restart): once more on a new connection.
  PQreset(conn_);
  if (Broken()) return Unavailable(PQerrorMessage(conn_));
  return ExecOnce(sql, params, binary_result);
}

absl::StatusOr<PgResult> PgConnection::ExecOnce(absl::string_view sql,
                                                const std::vector<PgParam>& params,
                                                bool binary_result) {
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  for (const PgParam& p : params) {
    values.push_back(p.value.has_value() ? p.value->data() : nullptr);
    lengths.push_back(p.value.has_value() ? static_cast<int>(p.value->size()) : 0);
    formats.push_back(p.binary ? 1 : 0);
  }
  const std::string text(sql);
  PGresult* raw =
      PQexecParams(conn_, text.c_str(), static_cast<int>(params.size()), nullptr, values.data(),
                   lengths.data(), formats.data(), binary_result ? 1 : 0);
  if (raw == nullptr) return Unavailable(PQerrorMessage(conn_));
  PgResult result(raw);
  const ExecStatusType status = PQresultStatus(raw);
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  if (Broken()) return Unavailable(PQerrorMessage(conn_));
  const char* state = PQresultErrorField(raw, PG_DIAG_SQLSTATE);
  const std::string code = state == nullptr ? "" : state;
  const std::string message =
      absl::StrCat("PostgreSQL store (", where_, "): ", Trimmed(PQresultErrorMessage(raw)),
                   code.empty() ? "" : absl::StrCat(" [", code, "]"));
  // Class 08: connection exceptions; 57P: the server shutting down or not yet up; 53: out of
  // resources (too many connections, disk full).
  if (absl::StartsWith(code, "08") || absl::StartsWith(code, "57P") ||
      absl::StartsWith(code, "53")) {
    return absl::UnavailableError(message);
  }
  if (code == "40001" || code == "40P01") return absl::AbortedError(message);
  return absl::InternalError(message);
}

}  // namespace tracetorch::daemon
