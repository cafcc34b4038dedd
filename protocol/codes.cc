#include "protocol/codes.h"

#include <array>
#include <charconv>

#include "absl/strings/str_cat.h"

namespace tracetorch::protocol {
namespace {

// Indexed by c10::ScalarType (libtorch 1.13).
constexpr std::array<std::string_view, 18> kDtypeNames = {
    "torch.uint8",      "torch.int8",     "torch.int16",    "torch.int32",     "torch.int64",
    "torch.float16",    "torch.float32",  "torch.float64",  "torch.complex32", "torch.complex64",
    "torch.complex128", "torch.bool",     "torch.qint8",    "torch.quint8",    "torch.qint32",
    "torch.bfloat16",   "torch.quint4x2", "torch.quint2x4",
};

}  // namespace

int32_t DtypeCode(std::string_view torch_name) {
  // float32 first: by far the most common.
  if (torch_name == kDtypeNames[6]) return 6;
  for (size_t i = 0; i < kDtypeNames.size(); ++i) {
    if (kDtypeNames[i] == torch_name) return static_cast<int32_t>(i);
  }
  return kUnknownDtype;
}

std::string_view DtypeName(int32_t code) {
  if (code < 0 || static_cast<size_t>(code) >= kDtypeNames.size()) return "torch.unknown";
  return kDtypeNames[static_cast<size_t>(code)];
}

int32_t DeviceCode(std::string_view device) {
  if (device == "cpu") return kCpuDevice;
  if (device == "cuda") return 0;
  constexpr std::string_view kCuda = "cuda:";
  if (device.substr(0, kCuda.size()) != kCuda) return kUnknownDevice;
  std::string_view digits = device.substr(kCuda.size());
  int32_t index = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty() || index < 0) {
    return kUnknownDevice;
  }
  return index;
}

std::string DeviceName(int32_t code) {
  if (code == kCpuDevice) return "cpu";
  if (code >= 0) return absl::StrCat("cuda:", code);
  return "unknown";
}

}  // namespace tracetorch::protocol
