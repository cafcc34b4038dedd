// The default BaselineStore (baseline_store.h): baselines kept in the daemon's data directory.
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
// Without a data directory every call answers FailedPrecondition.
//
// Errors beyond baseline_store.h's: Set gives Internal when the sidecar cannot be encoded and
// Internal/PermissionDenied/ResourceExhausted when the files cannot be written (nothing is written
// when encoding fails); Get gives InvalidArgument for a file that does not parse (the message names
// the file) and a file's read error (PermissionDenied, ...) as it is; a sidecar that is missing,
// unreadable or not NAME.json's gives the baseline no history (see above), never an error. List
// skips files that are not baselines (bad names, temporaries) and lists a NAME.json that does not
// parse with layers = 0 and source "unreadable: <why>". Remove takes NAME.json, then its sidecar
// (a sidecar left behind is never used: no NAME.json matches it).
//
// Thread-safe: calls are serialised by one mutex (they are rare and small next to ingest).
#ifndef TRACETORCH_DAEMON_CORE_FILE_BASELINE_STORE_H_
#define TRACETORCH_DAEMON_CORE_FILE_BASELINE_STORE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/baseline_store.h"
#include "daemon/core/write_health.h"
#include "trace/record.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {

class FileBaselineStore final : public BaselineStore {
 public:
  using Clock = std::function<absl::Time()>;

  // `data_dir` empty: no storage (every call FailedPrecondition). The baselines folder is created
  // by the first Set. `health` (not owned, may be null; it must outlive the store) counts and logs
  // the Sets and Removes that fail to write (daemon/core/write_health.h).
  explicit FileBaselineStore(std::string data_dir, Clock clock = absl::Now,
                             WriteHealth* health = nullptr);

  absl::StatusOr<v1::BaselineInfo> Set(absl::string_view name, const TraceRecord& record,
                                       std::vector<v1::LayerHistory> history,
                                       absl::string_view source) override ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<Baseline> Get(absl::string_view name) const override ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<std::vector<v1::BaselineInfo>> List() const override ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status Remove(absl::string_view name) override ABSL_LOCKS_EXCLUDED(mu_);
  std::string Describe() const override;

  // DATA_DIR/baselines, or empty without a data dir.
  const std::string& dir() const { return dir_; }

 private:
  absl::Status CheckUsable(absl::string_view name) const;
  // Tells health_ how a write went; returns `status`.
  absl::Status Wrote(const absl::Status& status) const;
  std::string RecordPath(absl::string_view name) const;
  std::string MetaPath(absl::string_view name) const;
  // Reads NAME.json and its sidecar. `with_record`: also parse the record (List needs only the
  // sidecar when it matches).
  absl::StatusOr<Baseline> Load(absl::string_view name, bool with_record) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::string dir_;  // Constant after construction.
  const Clock clock_;
  WriteHealth* const health_;

  mutable absl::Mutex mu_;  // Serialises access to the files.
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_FILE_BASELINE_STORE_H_
