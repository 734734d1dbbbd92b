//===- NpyTest.cpp - .npy reading and writing ------------------------------===//

#include "tq/Quant/Npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace tq::quant;

namespace {

/// An .npy (version `major`) with `header` as its dict and `dataBytes`
/// bytes of data (the values 0, 1, 2, ... as float32 where they fit).
std::vector<uint8_t> npyWith(const std::string &header, size_t dataBytes,
                             unsigned major = 1) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(major), 0};
  const size_t n = header.size();
  out.push_back(uint8_t(n));
  out.push_back(uint8_t(n >> 8));
  if (major > 1) {
    out.push_back(uint8_t(n >> 16));
    out.push_back(uint8_t(n >> 24));
  }
  out.insert(out.end(), header.begin(), header.end());
  for (size_t i = 0; i < dataBytes; i += 4) {
    float v = float(i / 4);
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    out.insert(out.end(), b, b + std::min<size_t>(4, dataBytes - i));
  }
  return out;
}

TEST(Npy, WriteThenParseRoundTrips) {
  const size_t shape[] = {2, 3, 4};
  std::vector<float> values(24);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = 0.5f * float(i) - 3.0f;
  std::vector<uint8_t> bytes = writeNpy(shape, values);
  ASSERT_TRUE(isNpy(bytes));
  // The data starts on a 64-byte boundary, as NumPy writes it.
  EXPECT_EQ((bytes.size() - values.size() * 4) % 64, 0u);
  Result<NpyArray> back = parseNpy(bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->shape, (std::vector<size_t>{2, 3, 4}));
  EXPECT_EQ(back->values, values);
  EXPECT_EQ(describeShape(back->shape), "(2, 3, 4)");

  const size_t one[] = {3};
  Result<NpyArray> vec = parseNpy(writeNpy(one, {values.data(), 3}));
  ASSERT_TRUE(vec.ok()) << vec.status().message();
  EXPECT_EQ(vec->shape, (std::vector<size_t>{3}));
}

TEST(Npy, ReadsWhatNumPyWrites) {
  // numpy.save's header for float32 (2, 3), and the version 2 preamble.
  for (unsigned major : {1u, 2u, 3u}) {
    Result<NpyArray> a = parseNpy(npyWith(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }    \n",
        24, major));
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(a->shape, (std::vector<size_t>{2, 3}));
    EXPECT_EQ(a->values[5], 5.0f);
  }
  // A scalar (shape ()) holds one value.
  Result<NpyArray> scalar = parseNpy(
      npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", 4));
  ASSERT_TRUE(scalar.ok()) << scalar.status().message();
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->values.size(), 1u);
}

TEST(Npy, WhatItCannotReadIsAnErrorThatSaysWhy) {
  auto error = [](const std::vector<uint8_t> &bytes) {
    Result<NpyArray> a = parseNpy(bytes);
    EXPECT_FALSE(a.ok());
    return a.ok() ? std::string() : a.status().message();
  };
  EXPECT_NE(error({'a', 'b', 'c'}).find("not an .npy"), std::string::npos);
  EXPECT_NE(error({0x93, 'N', 'U', 'M', 'P', 'Y', 1}).find("truncated"),
            std::string::npos);
  EXPECT_NE(error(npyWith("{'descr': '<f8', 'fortran_order': False, "
                          "'shape': (2,), }\n",
                          16))
                .find("'<f8'"),
            std::string::npos);
  EXPECT_NE(error(npyWith("{'descr': '>f4', 'fortran_order': False, "
                          "'shape': (2,), }\n",
                          8))
                .find("little-endian float32"),
            std::string::npos);
  EXPECT_NE(error(npyWith("{'descr': '<f4', 'fortran_order': True, "
                          "'shape': (2, 2), }\n",
                          16))
                .find("Fortran order"),
            std::string::npos);
  EXPECT_NE(error(npyWith("{'descr': '<f4', 'fortran_order': False, "
                          "'shape': (2, 3), }\n",
                          20))
                .find("needs 24 bytes of data, the file has 20"),
            std::string::npos);
  EXPECT_NE(error(npyWith("{'descr': '<f4', 'fortran_order': False, "
                          "'shape': (a, 3), }\n",
                          0))
                .find("not a tuple of integers"),
            std::string::npos);
  EXPECT_NE(error(npyWith("{'descr': '<f4', 'fortran_order': False, "
                          "'shape': (99999999999999999999999, 3), }\n",
                          0))
                .find("too large"),
            std::string::npos);
  EXPECT_NE(error(npyWith("{'descr': '<f4', 'fortran_order': False, "
                          "'shape': (4294967296, 4294967296), }\n",
                          0))
                .find("too large"),
            std::string::npos);
  EXPECT_NE(error(npyWith("{'descr': '<f4', 'fortran_order': False}\n", 0))
                .find("no 'shape'"),
            std::string::npos);
  // A header length past the end of the file.
  std::vector<uint8_t> cut = npyWith(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", 4);
  cut.resize(20);
  EXPECT_NE(error(cut).find("past the end"), std::string::npos);
  EXPECT_NE(error(npyWith("{}", 0, 4)).find("version 4"), std::string::npos);
}

} // namespace
