#include "protocol/codes.h"

#include "gtest/gtest.h"

namespace tracetorch::protocol {
namespace {

TEST(Codes, DtypeRoundTripsEveryName) {
  for (int32_t code = 0; code < 18; ++code) {
    EXPECT_EQ(DtypeCode(DtypeName(code)), code) << DtypeName(code);
  }
  EXPECT_EQ(DtypeCode("torch.float32"), 6);
  EXPECT_EQ(DtypeCode("torch.bfloat16"), 15);
  EXPECT_EQ(DtypeCode("float32"), kUnknownDtype);
  EXPECT_EQ(DtypeName(99), "torch.unknown");
  EXPECT_EQ(DtypeName(-1), "torch.unknown");
}

TEST(Codes, DeviceRoundTrips) {
  EXPECT_EQ(DeviceCode("cpu"), kCpuDevice);
  EXPECT_EQ(DeviceCode("cuda:3"), 3);
  EXPECT_EQ(DeviceCode("cuda"), 0);
  EXPECT_EQ(DeviceCode("cuda:"), kUnknownDevice);
  EXPECT_EQ(DeviceCode("cuda:1x"), kUnknownDevice);
  EXPECT_EQ(DeviceCode("mps"), kUnknownDevice);
  EXPECT_EQ(DeviceName(-1), "cpu");
  EXPECT_EQ(DeviceName(7), "cuda:7");
  EXPECT_EQ(DeviceName(kUnknownDevice), "unknown");
}

}  // namespace
}  // namespace tracetorch::protocol
