// CRC-32C (Castagnoli), as TFRecord framing uses it, and TensorFlow's masked form of it.
//
// Thread-safe: pure functions (the table is built at compile time).
#ifndef TRACETORCH_REPORT_TENSORBOARD_CRC32C_H_
#define TRACETORCH_REPORT_TENSORBOARD_CRC32C_H_

#include <cstdint>
#include <string_view>

namespace tracetorch::tensorboard {

// CRC-32C of `data` (polynomial 0x1EDC6F41, reflected; Crc32c("123456789") == 0xE3069283).
uint32_t Crc32c(std::string_view data);

// TensorFlow's mask over a CRC stored beside the data it covers:
// ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t MaskCrc32c(uint32_t crc);

}  // namespace tracetorch::tensorboard

#endif  // TRACETORCH_REPORT_TENSORBOARD_CRC32C_H_
