//===- HalfTest.cpp - IEEE binary16 conversions ---------------------------===//

#include "tq/Quant/Half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

using namespace tq::quant;

namespace {

TEST(Half, ExactValuesRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) // NaN payloads
      continue;
    float f = halfToFloat(uint16_t(h));
    EXPECT_EQ(floatToHalf(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between odd 1+2^-10 and even 1+2^-9.
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  // Subnormals: 2^-25 is a tie between 0 and the smallest subnormal.
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);
  EXPECT_EQ(floatToHalf(0x1.8p-25f), 0x0001);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
}

TEST(Half, OverflowGoesToInfinityUnlessSaturating) {
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalf(-1e9f), 0xfc00);
  bool saturated = false;
  EXPECT_EQ(floatToHalfSaturating(65504.0f, &saturated), 0x7bff);
  EXPECT_FALSE(saturated);
  EXPECT_EQ(floatToHalfSaturating(1e9f, &saturated), 0x7bff);
  EXPECT_TRUE(saturated);
  saturated = false;
  EXPECT_EQ(floatToHalfSaturating(-1e30f, &saturated), 0xfbff);
  EXPECT_TRUE(saturated);
  // Infinity itself is not a finite overflow.
  saturated = false;
  EXPECT_EQ(floatToHalfSaturating(std::numeric_limits<float>::infinity(),
                                  &saturated),
            0x7c00);
  EXPECT_FALSE(saturated);
}

TEST(Half, NaNStaysNaN) {
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::nanf("")))));
}

} // namespace
