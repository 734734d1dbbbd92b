//===- QuantDecodeFuzzer.cpp - Decoding arbitrary bytes --------------------===//
//
// What tq-quant decode and the .npy reader do with bytes nobody checked:
// a format and head dim from the first bytes, then every whole row of the
// rest decoded in both domains, and the whole input parsed as an .npy.
// Decoding must return a status, never crash or read out of bounds.
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"

#include "tq/Quant/Format.h"
#include "tq/Quant/Npy.h"

#include <vector>

using namespace tq::quant;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)parseNpy(std::span<const uint8_t>(data, size));
  tq::fuzz::FuzzInput in(data, size);
  std::span<const FormatInfo> formats = allFormats();
  const FormatInfo &info = formats[in.below(uint32_t(formats.size()))];
  // Head dims the tools meet, and odd ones (haar4 takes any >= 3).
  static const unsigned dims[] = {1, 3, 32, 48, 64, 80, 96, 100, 128, 256};
  const unsigned dim = dims[in.below(sizeof dims / sizeof dims[0])];
  Result<Format> format = Format::get(info.name, dim);
  if (!format)
    return 0;
  const size_t rowBytes = format->rowBytes();
  std::vector<float> original(format->headDim()),
      rotated(format->paddedDim());
  for (size_t r = 0; r < 8 && in.remaining() >= rowBytes; ++r) {
    std::span<const uint8_t> row(in.rest(), rowBytes);
    (void)format->decodeRow(row, original, Domain::Original);
    (void)format->decodeRow(row, rotated, Domain::Rotated);
    in.take<uint8_t>(); // the next row starts one byte later: overlaps too
  }
  // A short buffer and a wrong output size are errors, not reads.
  (void)format->decodeRow(std::span<const uint8_t>(data, size / 2), original,
                          Domain::Original);
  std::vector<float> wrong(format->headDim() + 1);
  if (in.remaining() >= rowBytes)
    (void)format->decodeRow(std::span<const uint8_t>(in.rest(), rowBytes),
                            wrong, Domain::Original);
  return 0;
}
