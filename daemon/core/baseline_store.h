// Named reference traces for CI, kept in the daemon's data directory so that every CI job of a
// fleet compares against the same one (service.proto: SetBaseline, ListBaselines,
// RemoveBaseline, and DiffOperand.baseline_name).
//
// On disk, in DATA_DIR/baselines/ (it is just files, so baselines survive a daemon restart):
//   NAME.json           the record in the core JSON layout (trace/json.h): `tracetorch inspect`
//                       and `tracetorch diff` read it as any trace file.
//   .NAME.meta.json     one BaselineSidecar (proto/tracetorch/v1/baseline_sidecar.proto) in
//                       protobuf JSON: BaselineInfo (created, source), the per-step history
//                       (LayerHistory) and a fingerprint of NAME.json's bytes. Sidecars written
//                       before that message existed have the same fields and are read alike. A
//                       name never starts with '.', so no sidecar is ever another baseline's
//                       NAME.json.
// Set writes the sidecar first and NAME.json last, each atomically (trace/atomic_file.h). A
// NAME.json whose bytes do not match its sidecar's fingerprint (a crash between the two writes,
// or a file copied in by hand) is still a baseline: it has no history, its source reads "file"
// and its creation time is the file's modification time.
//
// Names: [A-Za-z0-9._-]{1,128}, not starting with '.', so a name is always one plain file name
// ("../x", "a/b", "" and ".hidden" are InvalidArgument).
//
// Without a data directory every call answers FailedPrecondition.
//
// Thread-safe: calls are serialised by one mutex (they are rare and small next to ingest).
#ifndef TRACETORCH_DAEMON_CORE_BASELINE_STORE_H_
#define TRACETORCH_DAEMON_CORE_BASELINE_STORE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
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
  using Clock = std::function<absl::Time()>;

  // `data_dir` empty: no storage (every call FailedPrecondition). The baselines folder is created
  // by the first Set.
  explicit BaselineStore(std::string data_dir, Clock clock = absl::Now);

  // OK for a valid name, else InvalidArgument saying what is wrong.
  static absl::Status ValidateName(absl::string_view name);

  // Stores (or replaces) `name`. `source` describes where it came from ("session <id>",
  // "upload", "baseline <other>"). Returns its BaselineInfo. InvalidArgument for a bad name;
  // FailedPrecondition without a data dir; Internal when the sidecar cannot be encoded;
  // Internal/PermissionDenied/ResourceExhausted when the files cannot be written (nothing is
  // written when encoding fails).
  absl::StatusOr<v1::BaselineInfo> Set(absl::string_view name, const TraceRecord& record,
                                       std::vector<v1::LayerHistory> history,
                                       absl::string_view source) ABSL_LOCKS_EXCLUDED(mu_);

  // NotFound (naming the baseline) when there is none; InvalidArgument for a bad name or a file
  // that does not parse (the message names the file); FailedPrecondition without a data dir; a
  // file that cannot be read is its read error (PermissionDenied, ...). A sidecar that is missing,
  // unreadable or not NAME.json's gives the baseline no history (see above), never an error.
  absl::StatusOr<Baseline> Get(absl::string_view name) const ABSL_LOCKS_EXCLUDED(mu_);

  // Every baseline, by name. Files that are not baselines (bad names, temporaries) are skipped; a
  // NAME.json that does not parse is listed with layers = 0 and source "unreadable: <why>".
  absl::StatusOr<std::vector<v1::BaselineInfo>> List() const ABSL_LOCKS_EXCLUDED(mu_);

  // Removes NAME.json, then its sidecar (a sidecar left behind is never used: no NAME.json
  // matches it). NotFound when there is no such baseline; InvalidArgument for a bad name;
  // FailedPrecondition without a data dir; PermissionDenied/Internal when NAME.json cannot be
  // removed.
  absl::Status Remove(absl::string_view name) ABSL_LOCKS_EXCLUDED(mu_);

  // DATA_DIR/baselines, or empty without a data dir.
  const std::string& dir() const { return dir_; }

 private:
  absl::Status CheckUsable(absl::string_view name) const;
  std::string RecordPath(absl::string_view name) const;
  std::string MetaPath(absl::string_view name) const;
  // Reads NAME.json and its sidecar. `with_record`: also parse the record (List needs only the
  // sidecar when it matches).
  absl::StatusOr<Baseline> Load(absl::string_view name, bool with_record) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::string dir_;  // Constant after construction.
  const Clock clock_;

  mutable absl::Mutex mu_;  // Serialises access to the files.
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_BASELINE_STORE_H_
