#include "trace/json_element_reader.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "simdjson.h"
#include "trace/json_scanner.h"

namespace tracetorch {
namespace json_internal {
namespace {

using simdjson::dom::element_type;

void RenderPath(const Path& p, std::string* out) {
  if (p.parent == nullptr) return;  // The document root.
  RenderPath(*p.parent, out);
  if (p.index >= 0) {
    absl::StrAppend(out, "[", p.index, "]");
  } else {
    if (!out->empty()) out->push_back('.');
    out->append(p.key);
  }
}

}  // namespace

absl::Status ShapeError(const Path& path, std::string_view problem) {
  std::string where;
  RenderPath(path, &where);
  if (where.empty()) where = "document";
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", absl::string_view(problem.data(), problem.size())));
}

bool ElementReader::Sentinel(element e, double* out) const {
  if (!rewritten_) return false;
  std::string_view s;
  if (e.get(s) != simdjson::SUCCESS) return false;
  return DecodeSentinel(s, out);
}

absl::Status ElementReader::ReadString(element e, const Path& path, std::string* out) const {
  std::string_view s;
  if (e.get(s) != simdjson::SUCCESS) return ShapeError(path, "expected a string");
  double ignored;
  if (Sentinel(e, &ignored)) return ShapeError(path, "expected a string");
  out->assign(s.data(), s.size());
  return absl::OkStatus();
}

absl::Status ElementReader::ReadOptDouble(element e, const Path& path,
                                          std::optional<double>* out) const {
  double v;
  if (e.get(v) == simdjson::SUCCESS) {
    *out = v;
    return absl::OkStatus();
  }
  if (e.is_null()) {
    out->reset();
    return absl::OkStatus();
  }
  if (Sentinel(e, &v)) {
    *out = v;
    return absl::OkStatus();
  }
  return ShapeError(path, "expected a number or null");
}

absl::Status ElementReader::ReadInt(element e, const Path& path, int64_t* out) const {
  switch (e.type()) {
    case element_type::INT64:
      *out = e.get_int64().value_unsafe();
      return absl::OkStatus();
    case element_type::DOUBLE: {
      // Accept 20.0 for 20: harmless, and some writers cannot tell ints from floats.
      const double d = e.get_double().value_unsafe();
      if (d >= -9.2233720368547758e18 && d < 9.2233720368547758e18 && d == std::trunc(d)) {
        *out = static_cast<int64_t>(d);
        return absl::OkStatus();
      }
      return ShapeError(path, "expected an integer");
    }
    case element_type::UINT64:
      return ShapeError(path, "integer out of range");
    default:
      return ShapeError(path, "expected an integer");
  }
}

absl::Status ElementReader::ReadOptInt(element e, const Path& path,
                                       std::optional<int64_t>* out) const {
  if (e.is_null()) {
    out->reset();
    return absl::OkStatus();
  }
  int64_t v = 0;  // Set by ReadInt on success; initialised for GCC -O3 (-Wmaybe-uninitialized).
  if (auto s = ReadInt(e, path, &v); !s.ok())
    return ShapeError(path, "expected an integer or null");
  *out = v;
  return absl::OkStatus();
}

absl::Status ElementReader::ReadInt32(element e, const Path& path, int32_t* out) const {
  int64_t v;
  if (auto s = ReadInt(e, path, &v); !s.ok()) return s;
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    return ShapeError(path, "integer out of range");
  }
  *out = static_cast<int32_t>(v);
  return absl::OkStatus();
}

absl::Status ElementReader::ReadBool(element e, const Path& path, bool* out) const {
  if (e.get(*out) != simdjson::SUCCESS) return ShapeError(path, "expected true or false");
  return absl::OkStatus();
}

absl::Status ElementReader::GetArray(element e, const Path& path, array* out) const {
  if (e.get(*out) != simdjson::SUCCESS) return ShapeError(path, "expected an array");
  return absl::OkStatus();
}

absl::Status ElementReader::GetObject(element e, const Path& path, object* out) const {
  if (e.get(*out) != simdjson::SUCCESS) return ShapeError(path, "expected an object");
  return absl::OkStatus();
}

}  // namespace json_internal
}  // namespace tracetorch
