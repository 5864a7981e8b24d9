#include <gtest/gtest.h>

#include "runtime/core/types.hpp"

namespace ktune {
namespace {

TEST(Types, DtypeNamesRoundTrip) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::e4m3}) {
    std::optional<DType> back = parse_dtype(dtype_name(t));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(parse_dtype("half"), DType::f16);
  EXPECT_FALSE(parse_dtype("int8").has_value());
  EXPECT_FALSE(parse_dtype("").has_value());
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::e4m3), 1u);
  EXPECT_EQ(parse_dtype("fp8"), DType::e4m3);
  EXPECT_EQ(parse_dtype("float8_e4m3fn"), DType::e4m3);
  EXPECT_STREQ(dtype_name(DType::e4m3), "e4m3");
}

TEST(Types, ArchIsExactTarget) {
  DeviceInfo d;
  d.cc_major = 9;
  d.cc_minor = 0;
  EXPECT_EQ(d.arch(), "sm_90a");
  d.cc_major = 8;
  d.cc_minor = 6;
  EXPECT_EQ(d.arch(), "sm_86");
}

TEST(Types, DeviceKeyNamesTheHardware) {
  DeviceInfo a = *device_for_arch("sm_90a");
  DeviceInfo b = a;
  EXPECT_EQ(a.key(), b.key());
  b.driver_version = a.driver_version + 10;  // a driver update keeps the key
  EXPECT_EQ(a.key(), b.key());
  b.sm_count = 114;                          // another SKU does not
  EXPECT_NE(a.key(), b.key());
  EXPECT_NE(a.key().find(a.name), std::string::npos);
}

TEST(Types, BuiltInArchDescriptions) {
  ASSERT_TRUE(device_for_arch("sm_80").has_value());
  ASSERT_TRUE(device_for_arch("sm_90a").has_value());
  EXPECT_FALSE(device_for_arch("sm_75").has_value());
  EXPECT_EQ(device_for_arch("sm_90a")->arch(), "sm_90a");
  EXPECT_EQ(device_for_arch("sm_80")->arch(), "sm_80");
  EXPECT_GT(device_for_arch("sm_90a")->smem_optin_per_block, device_for_arch("sm_80")->smem_optin_per_block);
}

}  // namespace
}  // namespace ktune
