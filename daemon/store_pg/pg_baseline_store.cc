#include "daemon/store_pg/pg_baseline_store.h"

#include <zlib.h>

#include <cstdint>
#include <iterator>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/store_pg/pg_schema.h"
#include "trace/json.h"
#include "tracetorch/v1/baseline_sidecar.pb.h"

namespace tracetorch::daemon {
namespace {

constexpr absl::string_view kSidecarFormat = "tracetorch-baseline-pg/1";

std::string Compress(absl::string_view bytes) {
  uLongf size = compressBound(bytes.size());
  std::string out(size, '\0');
  compress2(reinterpret_cast<Bytef*>(out.data()), &size,
            reinterpret_cast<const Bytef*>(bytes.data()), bytes.size(), Z_DEFAULT_COMPRESSION);
  out.resize(size);
  return out;
}

absl::StatusOr<std::string> Decompress(absl::string_view bytes, absl::string_view size_text,
                                       absl::string_view what) {
  uint64_t size = 0;
  if (!absl::SimpleAtoi(size_text, &size) || size > (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": bad stored size '", size_text, "'"));
  }
  std::string out(size, '\0');
  uLongf got = size;
  if (uncompress(reinterpret_cast<Bytef*>(out.data()), &got,
                 reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()) != Z_OK ||
      got != size) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": stored data does not decompress"));
  }
  return out;
}

}  // namespace

bool IsPostgresUrl(absl::string_view store) {
  return absl::StartsWith(store, "postgresql://") || absl::StartsWith(store, "postgres://");
}

absl::StatusOr<std::unique_ptr<PgBaselineStore>> PgBaselineStore::Open(const std::string& url,
                                                                       Clock clock) {
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = PgConnection::Open(url);
  if (!conn.ok()) return conn.status();
  std::unique_ptr<PgBaselineStore> store(new PgBaselineStore(*std::move(conn), std::move(clock)));
  absl::MutexLock lock(&store->mu_);
  if (absl::Status s = MigratePgSchema(*store->conn_); !s.ok()) return s;
  return store;
}

absl::StatusOr<v1::BaselineInfo> PgBaselineStore::Set(absl::string_view name,
                                                      const TraceRecord& record,
                                                      std::vector<v1::LayerHistory> history,
                                                      absl::string_view source) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  const v1::BaselineInfo info = MakeBaselineInfo(name, record, !history.empty(), source, clock_());
  v1::BaselineSidecar sidecar;
  sidecar.set_format(std::string(kSidecarFormat));
  *sidecar.mutable_info() = info;
  for (v1::LayerHistory& h : history) *sidecar.add_history() = std::move(h);
  std::string sidecar_bytes;
  if (!sidecar.SerializeToString(&sidecar_bytes)) {
    return absl::InternalError(absl::StrCat("cannot encode the metadata of baseline '", name, "'"));
  }
  const std::string record_json = TraceToJson(record);
  absl::MutexLock lock(&mu_);
  absl::StatusOr<PgResult> r = conn_->Exec(
      "INSERT INTO tracetorch_baselines (name, created_unix_ns, source, model_name, layers, "
      "has_history, record_bytes, record, sidecar_bytes, sidecar) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (name) DO UPDATE SET "
      "created_unix_ns = EXCLUDED.created_unix_ns, source = EXCLUDED.source, "
      "model_name = EXCLUDED.model_name, layers = EXCLUDED.layers, "
      "has_history = EXCLUDED.has_history, record_bytes = EXCLUDED.record_bytes, "
      "record = EXCLUDED.record, sidecar_bytes = EXCLUDED.sidecar_bytes, "
      "sidecar = EXCLUDED.sidecar",
      {PgParam::Text(info.name()), PgParam::Text(absl::StrCat(info.created_unix_ns())),
       PgParam::Text(info.source()), PgParam::Text(info.model_name()),
       PgParam::Text(absl::StrCat(info.layers())),
       PgParam::Text(info.has_history() ? "true" : "false"),
       PgParam::Text(absl::StrCat(record_json.size())), PgParam::Bytes(Compress(record_json)),
       PgParam::Text(absl::StrCat(sidecar_bytes.size())), PgParam::Bytes(Compress(sidecar_bytes))});
  if (!r.ok()) return r.status();
  return info;
}

absl::StatusOr<Baseline> PgBaselineStore::Get(absl::string_view name) const {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  absl::StatusOr<PgResult> r;
  {
    absl::MutexLock lock(&mu_);
    r = conn_->Exec(
        "SELECT record_bytes::text, record, sidecar_bytes::text, sidecar "
        "FROM tracetorch_baselines WHERE name = $1",
        {PgParam::Text(std::string(name))}, /*binary_result=*/true);
  }
  if (!r.ok()) return r.status();
  if (r->rows() == 0) return NoSuchBaseline(name);
  const std::string what = absl::StrCat("baseline '", name, "' in ", where_);
  absl::StatusOr<std::string> json = Decompress(r->bytes(0, 1), r->bytes(0, 0), what);
  if (!json.ok()) return json.status();
  absl::StatusOr<std::string> meta = Decompress(r->bytes(0, 3), r->bytes(0, 2), what);
  if (!meta.ok()) return meta.status();
  v1::BaselineSidecar sidecar;
  if (!sidecar.ParseFromString(*meta) || sidecar.format() != kSidecarFormat) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": unreadable metadata"));
  }
  absl::StatusOr<TraceRecord> record = ParseTraceJson(*json);
  if (!record.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", record.status().message()));
  }
  Baseline out;
  out.record = *std::move(record);
  out.info = std::move(*sidecar.mutable_info());
  out.history.assign(std::make_move_iterator(sidecar.mutable_history()->begin()),
                     std::make_move_iterator(sidecar.mutable_history()->end()));
  return out;
}

absl::StatusOr<std::vector<v1::BaselineInfo>> PgBaselineStore::List() const {
  absl::StatusOr<PgResult> r;
  {
    absl::MutexLock lock(&mu_);
    r = conn_->Exec(
        "SELECT name, created_unix_ns, source, model_name, layers, has_history "
        "FROM tracetorch_baselines ORDER BY name COLLATE \"C\"");
  }
  if (!r.ok()) return r.status();
  std::vector<v1::BaselineInfo> out;
  out.reserve(static_cast<size_t>(r->rows()));
  for (int i = 0; i < r->rows(); ++i) {
    v1::BaselineInfo& info = out.emplace_back();
    info.set_name(r->bytes(i, 0));
    int64_t created = 0;
    uint32_t layers = 0;
    if (!absl::SimpleAtoi(r->bytes(i, 1), &created) || !absl::SimpleAtoi(r->bytes(i, 4), &layers)) {
      info.set_source("unreadable: bad stored columns");
      continue;
    }
    info.set_created_unix_ns(created);
    info.set_source(r->bytes(i, 2));
    info.set_model_name(r->bytes(i, 3));
    info.set_layers(layers);
    info.set_has_history(r->bytes(i, 5) == "t");
  }
  return out;
}

absl::Status PgBaselineStore::Remove(absl::string_view name) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<PgResult> r = conn_->Exec("DELETE FROM tracetorch_baselines WHERE name = $1",
                                           {PgParam::Text(std::string(name))});
  if (!r.ok()) return r.status();
  if (r->affected() == 0) return NoSuchBaseline(name);
  return absl::OkStatus();
}

std::string PgBaselineStore::Describe() const { return absl::StrCat("postgresql ", where_); }

}  // namespace tracetorch::daemon
