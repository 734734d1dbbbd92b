//===- Npy.h - float32 arrays in NumPy's .npy format ------------*- C++ -*-===//
//
// The tools accept .npy files wherever they accept raw float32: unlike a
// raw file, an .npy carries its shape and dtype, so a wrong head count or
// head dim is an error instead of a silent misread. Only what the tools
// need: little-endian float32, C order, format versions 1-3.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_QUANT_NPY_H
#define TQ_QUANT_NPY_H

#include "tq/Quant/Status.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tq::quant {

struct NpyArray {
  std::vector<size_t> shape;
  std::vector<float> values; // C order
};

/// True where `bytes` start with the .npy magic.
bool isNpy(std::span<const uint8_t> bytes);

/// Parses an .npy file's bytes: dtype '<f4' (float32), C order, as many
/// values as the shape says. Any other dtype, order or size is an error
/// that says what the file holds.
Result<NpyArray> parseNpy(std::span<const uint8_t> bytes);

/// A version 1.0 .npy of float32 `values` (C order) with `shape`.
std::vector<uint8_t> writeNpy(std::span<const size_t> shape,
                              std::span<const float> values);

/// "(2, 8, 128)".
std::string describeShape(std::span<const size_t> shape);

} // namespace tq::quant

#endif // TQ_QUANT_NPY_H
