#include "daemon/core/forensics.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/data_dir.h"
#include "google/protobuf/util/json_util.h"
#include "protocol/session_info_proto.h"
#include "trace/atomic_file.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::daemon {
namespace {

// The layers whose history the bundle keeps: around the position's layer, the NaN origin's, and
// those the ring saw go non-finite.
absl::flat_hash_set<std::string> LayersOfInterest(const BundleInputs& in,
                                                  const v1::Snapshot& snap) {
  absl::flat_hash_set<std::string> keep;
  const v1::FlightStatus& flight = snap.session().flight();
  const auto& layers = snap.record().layers();
  int at = -1;
  for (int i = 0; i < layers.size(); ++i) {
    if (!flight.layer().empty() && layers[i].full_name() == flight.layer()) at = i;
  }
  if (snap.record().metadata().has_nan_origin())
    keep.insert(snap.record().metadata().nan_origin().layer());
  if (at >= 0) {
    const int span = static_cast<int>(in.history_layers);
    for (int i = std::max(0, at - span); i <= std::min(layers.size() - 1, at + span); ++i) {
      keep.insert(layers[i].full_name());
    }
  } else {
    // No position: the first layers (the ones a fresh process was in).
    for (int i = 0; i < std::min<int>(layers.size(), 2 * static_cast<int>(in.history_layers) + 1);
         ++i) {
      keep.insert(layers[i].full_name());
    }
  }
  if (in.region != nullptr) {
    for (const flight::SpanView& s : in.region->spans) {
      if ((s.flags & flight::kSpanNonFinite) == 0) continue;
      auto name = in.region->names.find(s.layer);
      if (name != in.region->names.end()) keep.insert(name->second);
    }
  }
  return keep;
}

}  // namespace

std::string BuildBundle(const BundleInputs& in) {
  v1::ForensicBundle b;
  b.set_reason(in.reason);
  b.set_written_unix_ns(absl::ToUnixNanos(in.written));
  v1::Snapshot snap;
  protocol::ToProto(in.session->ToSnapshot(), &snap);
  const absl::flat_hash_set<std::string> keep = LayersOfInterest(in, snap);
  auto* history = snap.mutable_history();
  history->erase(
      std::remove_if(history->begin(), history->end(),
                     [&](const v1::LayerHistory& h) { return !keep.contains(h.full_name()); }),
      history->end());
  *b.mutable_snapshot() = std::move(snap);
  if (in.region != nullptr) {
    const flight::RegionView& r = *in.region;
    b.set_spans_written(r.spans_written);
    b.set_torn_spans(r.torn_spans);
    for (const flight::SpanView& s : r.spans) {
      v1::ForensicSpan* out = b.add_spans();
      out->set_step(s.step);
      out->set_start_unix_ns(r.position.ToUnixNs(s.start_ns));
      out->set_duration_ns(s.duration_ns);
      auto name = r.names.find(s.layer);
      out->set_layer(name != r.names.end() ? name->second : absl::StrCat("layer ", s.layer));
      out->set_thread(s.tid);
      out->set_backward(s.kind == flight::SpanKind::kBackward);
      out->set_non_finite((s.flags & flight::kSpanNonFinite) != 0);
    }
    for (size_t i = 0; i < r.position.steps.size(); ++i) {
      b.add_steps(r.position.steps[i]);
      b.add_step_start_unix_ns(r.position.ToUnixNs(r.position.step_starts_ns[i]));
    }
  }
  for (const ThreadStacksResult& t : in.stacks) {
    v1::ThreadStacks* out = b.add_stacks();
    out->set_tool(t.tool);
    out->set_text(t.text);
    out->set_error(t.error);
    if (t.taken != absl::InfinitePast()) out->set_taken_unix_ns(absl::ToUnixNanos(t.taken));
  }
  return b.SerializeAsString();
}

std::string BundlePath(std::string_view data_dir, std::string_view session_id) {
  if (data_dir.empty()) return "";
  return absl::StrCat(std::string(data_dir), "/sessions/", std::string(session_id),
                      ".forensics.json");
}

absl::Status WriteBundles(const std::string& path, std::string_view session_id,
                          const std::vector<std::string>& bundles) {
  v1::ForensicsResponse file;
  file.set_session_id(std::string(session_id));
  for (const std::string& bytes : bundles) {
    if (!file.add_bundles()->ParseFromString(bytes)) {
      return absl::InternalError("a forensic bundle does not parse");
    }
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  if (auto s = google::protobuf::util::MessageToJsonString(file, &json, options); !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot write ", path, " as JSON: ", s.ToString()));
  }
  return WriteFileAtomic(path, json, kDataFileMode);
}

absl::StatusOr<std::vector<std::string>> ReadBundles(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  v1::ForensicsResponse file;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (auto s = google::protobuf::util::JsonStringToMessage(*text, &file, options); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.ToString()));
  }
  std::vector<std::string> out;
  for (const v1::ForensicBundle& b : file.bundles()) out.push_back(b.SerializeAsString());
  return out;
}

}  // namespace tracetorch::daemon
