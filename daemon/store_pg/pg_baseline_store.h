// Named baselines in a PostgreSQL database (tracetorchd --store postgresql://...), so that several
// `tracetorchd --service-only` replicas over one database serve a fleet's CI diffs and answer
// alike. The contract is baseline_store.h's; what differs from the file store:
//
// Schema: created and migrated by the daemon itself (pg_schema.h). Version 1: one row per
// baseline in `tracetorch_baselines` with the BaselineInfo
// fields as columns (List reads only those) and two zlib-compressed blobs: the record in the core
// JSON layout (trace/json.h) and a BaselineSidecar (its info and per-step history, protobuf).
//
// Atomicity: Set is one INSERT ... ON CONFLICT DO UPDATE of that one row, so two replicas setting
// one name at once leave one complete baseline (the later), never a mix; Get reads the row in one
// statement.
//
// Failures: a server that is away gives Unavailable, naming the server (never a password); the
// next call reconnects, so calls succeed again once it is back. A broken connection under a
// statement is retried once on a new connection (every statement is idempotent). A blob that does
// not decompress or parse is InvalidArgument naming the baseline (List shows it as "unreadable").
//
// Thread-safe: calls are serialised on the one connection by a mutex (they are rare and small).
#ifndef TRACETORCH_DAEMON_STORE_PG_PG_BASELINE_STORE_H_
#define TRACETORCH_DAEMON_STORE_PG_PG_BASELINE_STORE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/baseline_store.h"
#include "daemon/store_pg/pg_connection.h"

namespace tracetorch::daemon {

// True for the store URLs this library serves: postgresql://... and postgres://...
bool IsPostgresUrl(absl::string_view store);

class PgBaselineStore final : public BaselineStore {
 public:
  using Clock = std::function<absl::Time()>;

  // Connects and creates or migrates the schema. Unavailable when the server cannot be reached;
  // InvalidArgument for a malformed connection string; FailedPrecondition for a newer schema.
  static absl::StatusOr<std::unique_ptr<PgBaselineStore>> Open(const std::string& url,
                                                               Clock clock = absl::Now);

  absl::StatusOr<v1::BaselineInfo> Set(absl::string_view name, const TraceRecord& record,
                                       std::vector<v1::LayerHistory> history,
                                       absl::string_view source) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<Baseline> Get(absl::string_view name) const override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<v1::BaselineInfo>> List() const override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Remove(absl::string_view name) override ABSL_LOCKS_EXCLUDED(mu_);
  std::string Describe() const override;

 private:
  PgBaselineStore(std::unique_ptr<PgConnection> conn, Clock clock)
      : clock_(std::move(clock)), where_(conn->where()), conn_(std::move(conn)) {}

  const Clock clock_;
  const std::string where_;
  mutable absl::Mutex mu_;
  const std::unique_ptr<PgConnection> conn_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_STORE_PG_PG_BASELINE_STORE_H_
