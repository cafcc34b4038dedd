// The small integer codes the ingest protocol uses instead of strings (see agent.proto).
//
// dtype: c10::ScalarType values (0 = torch.uint8 ... 6 = torch.float32 ... 15 = torch.bfloat16).
// device: -1 = "cpu", n >= 0 = "cuda:n"; kUnknownDevice (-2) for anything else (mps, xla, ...).
//
// Thread-safe: pure functions over constant tables.
#ifndef TRACETORCH_PROTOCOL_CODES_H_
#define TRACETORCH_PROTOCOL_CODES_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace tracetorch::protocol {

inline constexpr int32_t kUnknownDtype = -1;
inline constexpr int32_t kCpuDevice = -1;
inline constexpr int32_t kUnknownDevice = -2;

// "torch.float32" -> 6. kUnknownDtype for a name not in the table.
int32_t DtypeCode(std::string_view torch_name);
// 6 -> "torch.float32". "torch.unknown" for a code not in the table.
std::string_view DtypeName(int32_t code);

// "cpu" -> -1, "cuda:3" -> 3, "cuda" -> 0; kUnknownDevice otherwise.
int32_t DeviceCode(std::string_view device);
// -1 -> "cpu", 3 -> "cuda:3", anything else -> "unknown".
std::string DeviceName(int32_t code);

}  // namespace tracetorch::protocol

#endif  // TRACETORCH_PROTOCOL_CODES_H_
