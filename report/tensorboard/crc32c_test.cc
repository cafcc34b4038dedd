#include "report/tensorboard/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace tracetorch::tensorboard {
namespace {

TEST(Crc32c, MatchesTheStandardCheckValues) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);            // The CRC-32C check value.
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720, B.4.
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(Crc32c, MaskRotatesAndAddsTheConstant) {
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
  EXPECT_EQ(MaskCrc32c(0x00008000u), 0xa282ead9u);  // Bit 15 rotates to bit 0.
  EXPECT_EQ(MaskCrc32c(1), 0xa282ead8u + (1u << 17));
}

}  // namespace
}  // namespace tracetorch::tensorboard
