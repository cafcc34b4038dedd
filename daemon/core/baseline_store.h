// Named reference traces for CI (service.proto: SetBaseline, ListBaselines, RemoveBaseline, and
// DiffOperand.baseline_name), so that every CI job of a fleet compares against the same one.
//
// Two stores implement this contract:
//   FileBaselineStore (file_baseline_store.h)   files in the daemon's data directory (default);
//   PgBaselineStore (daemon/store_pg)           a PostgreSQL database shared by several replicas.
//
// Names: [A-Za-z0-9._-]{1,128}, not starting with '.', so a name is always one plain file name
// ("../x", "a/b", "" and ".hidden" are InvalidArgument in every store).
//
// Errors every store uses: InvalidArgument for a bad name (checked before anything is touched);
// NotFound, naming the baseline, when there is none; FailedPrecondition when the store cannot keep
// baselines at all (no data directory); Unavailable when the store is out of reach for now (its
// database is down) — the call may be retried and nothing was changed by a failed Set or Remove.
// Set replaces a baseline of the same name atomically: a Get concurrent with it, or after two
// concurrent Sets of one name, sees one complete baseline (record, history and info of the same
// Set), never a mix.
//
// Thread-safe: every implementation may be called from any thread.
#ifndef TRACETORCH_DAEMON_CORE_BASELINE_STORE_H_
#define TRACETORCH_DAEMON_CORE_BASELINE_STORE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "trace/record.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {

// A stored baseline.
struct Baseline {
  v1::BaselineInfo info;
  TraceRecord record;
  std::vector<v1::LayerHistory> history;  // Empty when made from a record without history.
};

class BaselineStore {
 public:
  virtual ~BaselineStore() = default;

  // OK for a valid name, else InvalidArgument saying what is wrong.
  static absl::Status ValidateName(absl::string_view name);

  // Stores (or replaces) `name`. `source` describes where it came from ("session <id>",
  // "upload", "baseline <other>"). Returns its BaselineInfo.
  virtual absl::StatusOr<v1::BaselineInfo> Set(absl::string_view name, const TraceRecord& record,
                                               std::vector<v1::LayerHistory> history,
                                               absl::string_view source) = 0;
  // The baseline with its record and history.
  virtual absl::StatusOr<Baseline> Get(absl::string_view name) const = 0;
  // Every baseline, by name.
  virtual absl::StatusOr<std::vector<v1::BaselineInfo>> List() const = 0;
  virtual absl::Status Remove(absl::string_view name) = 0;

  // Where the baselines live, for logs: a directory, or "postgresql host=... dbname=..." (never a
  // password).
  virtual std::string Describe() const = 0;
};

// The BaselineInfo a Set of `record` stores (every store fills it alike).
v1::BaselineInfo MakeBaselineInfo(absl::string_view name, const TraceRecord& record,
                                  bool has_history, absl::string_view source, absl::Time created);

// "no baseline named 'x'" (NotFound), as every store says it.
absl::Status NoSuchBaseline(absl::string_view name);

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_BASELINE_STORE_H_
