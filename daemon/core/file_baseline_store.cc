#include "daemon/core/file_baseline_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/data_dir.h"
#include "google/protobuf/util/json_util.h"
#include "trace/atomic_file.h"
#include "trace/json.h"
#include "tracetorch/v1/baseline_sidecar.pb.h"

namespace tracetorch::daemon {
namespace {

constexpr absl::string_view kMetaFormat = "tracetorch-baseline-meta/1";

// FNV-1a, 64 bits, as 16 hex digits: a fingerprint of NAME.json that ties the sidecar to it.
std::string Fingerprint(absl::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return absl::StrFormat("%016x", h);
}

absl::Status ErrnoStatus(int err, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Time ModificationTime(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return absl::UnixEpoch();
  return absl::TimeFromTimespec(st.st_mtim);
}

// The sidecar (BaselineSidecar) as protobuf JSON, field names as in the .proto (the layout of
// every sidecar written so far). Internal when protobuf cannot encode it.
absl::StatusOr<std::string> SidecarJson(const v1::BaselineInfo& info,
                                        std::vector<v1::LayerHistory> history,
                                        absl::string_view fingerprint) {
  v1::BaselineSidecar sidecar;
  sidecar.set_format(std::string(kMetaFormat));
  sidecar.set_record_fnv1a64(std::string(fingerprint));
  *sidecar.mutable_info() = info;
  sidecar.mutable_history()->Reserve(static_cast<int>(history.size()));
  for (v1::LayerHistory& h : history) *sidecar.add_history() = std::move(h);
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  if (auto s = google::protobuf::util::MessageToJsonString(sidecar, &out, options); !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot encode the metadata of baseline '", info.name(),
                                            "': ", s.message().as_string()));
  }
  out.push_back('\n');
  return out;
}

// The sidecar's contents, when it parses and belongs to `fingerprint`.
struct Meta {
  v1::BaselineInfo info;
  std::vector<v1::LayerHistory> history;
};

std::optional<Meta> ParseMeta(const std::string& text, absl::string_view fingerprint) {
  v1::BaselineSidecar sidecar;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // A newer daemon's additions.
  if (!google::protobuf::util::JsonStringToMessage(text, &sidecar, options).ok()) {
    return std::nullopt;
  }
  if (sidecar.format() != kMetaFormat || sidecar.record_fnv1a64() != fingerprint ||
      !sidecar.has_info()) {
    return std::nullopt;
  }
  Meta meta;
  meta.info = std::move(*sidecar.mutable_info());
  meta.history.assign(std::make_move_iterator(sidecar.mutable_history()->begin()),
                      std::make_move_iterator(sidecar.mutable_history()->end()));
  return meta;
}

absl::Status NoDataDir() {
  return absl::FailedPreconditionError(
      "named baselines need a data directory (tracetorchd --data-dir)");
}

}  // namespace

FileBaselineStore::FileBaselineStore(std::string data_dir, Clock clock, WriteHealth* health)
    : dir_(data_dir.empty() ? std::string()
                            : (std::filesystem::path(data_dir) / "baselines").string()),
      clock_(std::move(clock)),
      health_(health) {}

absl::Status FileBaselineStore::Wrote(const absl::Status& status) const {
  if (health_ != nullptr) {
    if (status.ok()) {
      health_->Succeeded();
    } else {
      health_->Failed(status, clock_());
    }
  }
  return status;
}

absl::Status FileBaselineStore::CheckUsable(absl::string_view name) const {
  if (dir_.empty()) return NoDataDir();
  return ValidateName(name);
}

std::string FileBaselineStore::RecordPath(absl::string_view name) const {
  return absl::StrCat(dir_, "/", name, ".json");
}

std::string FileBaselineStore::MetaPath(absl::string_view name) const {
  return absl::StrCat(dir_, "/.", name, ".meta.json");
}

absl::StatusOr<v1::BaselineInfo> FileBaselineStore::Set(absl::string_view name,
                                                        const TraceRecord& record,
                                                        std::vector<v1::LayerHistory> history,
                                                        absl::string_view source) {
  if (absl::Status s = CheckUsable(name); !s.ok()) return s;
  const v1::BaselineInfo info = MakeBaselineInfo(name, record, !history.empty(), source, clock_());
  const std::string record_json = TraceToJson(record);
  absl::StatusOr<std::string> meta_json =
      SidecarJson(info, std::move(history), Fingerprint(record_json));
  if (!meta_json.ok()) return meta_json.status();

  absl::MutexLock lock(&mu_);
  // Sidecar first: NAME.json is what makes the baseline exist, and a NAME.json without its
  // sidecar's fingerprint is taken without history, never with the wrong one.
  absl::Status s = MakeDataDirectory(dir_);
  if (s.ok()) s = WriteFileAtomic(MetaPath(name), *meta_json, kDataFileMode);
  if (s.ok()) s = WriteFileAtomic(RecordPath(name), record_json, kDataFileMode);
  if (!Wrote(s).ok()) return s;
  return info;
}

absl::StatusOr<Baseline> FileBaselineStore::Load(absl::string_view name, bool with_record) const {
  const std::string path = RecordPath(name);
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    if (text.status().code() == absl::StatusCode::kNotFound) {
      return NoSuchBaseline(name);
    }
    return text.status();
  }
  Baseline out;
  std::optional<Meta> meta;
  if (absl::StatusOr<std::string> meta_text = ReadFileToString(MetaPath(name)); meta_text.ok()) {
    meta = ParseMeta(*meta_text, Fingerprint(*text));
  }
  if (with_record || !meta.has_value()) {
    absl::StatusOr<TraceRecord> record = ParseTraceJson(*text);
    if (!record.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", record.status().message()));
    }
    out.record = *std::move(record);
  }
  if (meta.has_value()) {
    out.info = std::move(meta->info);
    out.history = std::move(meta->history);
  } else {
    out.info.set_created_unix_ns(absl::ToUnixNanos(ModificationTime(path)));
    out.info.set_source("file");
    out.info.set_model_name(out.record.metadata.model_name);
    out.info.set_layers(static_cast<uint32_t>(out.record.layers.size()));
  }
  out.info.set_name(std::string(name));
  out.info.set_has_history(!out.history.empty());
  return out;
}

absl::StatusOr<Baseline> FileBaselineStore::Get(absl::string_view name) const {
  if (absl::Status s = CheckUsable(name); !s.ok()) return s;
  absl::ReaderMutexLock lock(&mu_);
  return Load(name, /*with_record=*/true);
}

absl::StatusOr<std::vector<v1::BaselineInfo>> FileBaselineStore::List() const {
  if (dir_.empty()) return NoDataDir();
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::string> names;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir_, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return std::vector<v1::BaselineInfo>();
    return ErrnoStatus(ec.value(), absl::StrCat("cannot list ", dir_));
  }
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return ErrnoStatus(ec.value(), absl::StrCat("cannot list ", dir_));
    const std::string file = it->path().filename().string();
    if (!absl::EndsWith(file, ".json")) continue;
    const std::string name = file.substr(0, file.size() - 5);
    if (!ValidateName(name).ok()) continue;  // Sidecars, temporaries, strays.
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::vector<v1::BaselineInfo> out;
  out.reserve(names.size());
  for (const std::string& name : names) {
    absl::StatusOr<Baseline> b = Load(name, /*with_record=*/false);
    if (b.ok()) {
      out.push_back(std::move(b->info));
    } else if (b.status().code() != absl::StatusCode::kNotFound) {  // NotFound: removed meanwhile.
      v1::BaselineInfo& info = out.emplace_back();
      info.set_name(name);
      info.set_source(absl::StrCat("unreadable: ", b.status().message()));
      info.set_created_unix_ns(absl::ToUnixNanos(ModificationTime(RecordPath(name))));
    }
  }
  return out;
}

absl::Status FileBaselineStore::Remove(absl::string_view name) {
  if (absl::Status s = CheckUsable(name); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  const std::string path = RecordPath(name);
  if (unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return NoSuchBaseline(name);
    return Wrote(ErrnoStatus(errno, absl::StrCat("cannot remove ", path)));
  }
  (void)unlink(MetaPath(name).c_str());
  return Wrote(absl::OkStatus());
}

std::string FileBaselineStore::Describe() const {
  return dir_.empty() ? std::string("no baselines (no data directory)") : dir_;
}

}  // namespace tracetorch::daemon
