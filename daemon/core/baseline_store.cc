#include "daemon/core/baseline_store.h"

#include <cstddef>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tracetorch::daemon {
namespace {

constexpr size_t kMaxNameLength = 128;

}  // namespace

absl::Status BaselineStore::ValidateName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("a baseline name must not be empty");
  if (name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("a baseline name has at most ", kMaxNameLength,
                                                   " characters (got ", name.size(), ")"));
  }
  if (name.front() == '.') {
    return absl::InvalidArgumentError(
        absl::StrCat("baseline name '", name, "' must not start with '.'"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("baseline name '", absl::CHexEscape(name),
                       "' may use only letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

v1::BaselineInfo MakeBaselineInfo(absl::string_view name, const TraceRecord& record,
                                  bool has_history, absl::string_view source, absl::Time created) {
  v1::BaselineInfo info;
  info.set_name(std::string(name));
  info.set_created_unix_ns(absl::ToUnixNanos(created));
  info.set_source(std::string(source));
  info.set_model_name(record.metadata.model_name);
  info.set_layers(static_cast<uint32_t>(record.layers.size()));
  info.set_has_history(has_history);
  return info;
}

absl::Status NoSuchBaseline(absl::string_view name) {
  return absl::NotFoundError(absl::StrCat("no baseline named '", name, "'"));
}

}  // namespace tracetorch::daemon
