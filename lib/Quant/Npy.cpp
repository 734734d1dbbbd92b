//===- Npy.cpp - float32 arrays in NumPy's .npy format ---------------------===//
//
// Layout: "\x93NUMPY", major, minor, header length (2 bytes little-endian
// in version 1, 4 in versions 2 and 3), then a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (a, b, c), } padded
// with spaces to a multiple of 64 bytes and ended by '\n', then the data.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Npy.h"

#include <cstring>
#include <limits>

namespace tq::quant {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

/// The text after `'key':` in the header dict, spaces skipped; npos if
/// the key is missing.
size_t valueOf(const std::string &header, const char *key) {
  std::string quoted = std::string("'") + key + "'";
  size_t at = header.find(quoted);
  if (at == std::string::npos)
    return at;
  at = header.find(':', at + quoted.size());
  if (at == std::string::npos)
    return at;
  at = header.find_first_not_of(' ', at + 1);
  return at;
}

} // namespace

bool isNpy(std::span<const uint8_t> bytes) {
  return bytes.size() >= kMagicBytes &&
         std::memcmp(bytes.data(), kMagic, kMagicBytes) == 0;
}

Result<NpyArray> parseNpy(std::span<const uint8_t> bytes) {
  if (!isNpy(bytes))
    return Status::error("not an .npy file (no \\x93NUMPY magic)");
  if (bytes.size() < 10)
    return Status::error(".npy file truncated in its preamble");
  const unsigned major = bytes[6];
  size_t headerBytes, start;
  if (major == 1) {
    headerBytes = size_t(bytes[8]) | size_t(bytes[9]) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return Status::error(".npy file truncated in its preamble");
    headerBytes = size_t(bytes[8]) | size_t(bytes[9]) << 8 |
                  size_t(bytes[10]) << 16 | size_t(bytes[11]) << 24;
    start = 12;
  } else {
    return Status::error(".npy format version " + std::to_string(major) +
                         " is not supported (1, 2 or 3)");
  }
  if (headerBytes > bytes.size() - start)
    return Status::error(".npy header runs past the end of the file");
  std::string header(reinterpret_cast<const char *>(bytes.data() + start),
                     headerBytes);
  size_t at = valueOf(header, "descr");
  if (at == std::string::npos)
    return Status::error(".npy header has no 'descr'");
  size_t end = header.find_first_of(",}", at);
  std::string descr = header.substr(at, end - at);
  while (!descr.empty() && descr.back() == ' ')
    descr.pop_back();
  if (descr != "'<f4'")
    return Status::error(".npy dtype is " + descr +
                         ", expected '<f4' (little-endian float32)");
  at = valueOf(header, "fortran_order");
  if (at == std::string::npos)
    return Status::error(".npy header has no 'fortran_order'");
  if (header.compare(at, 5, "False") != 0)
    return Status::error(".npy array is in Fortran order; save it in C "
                         "order (numpy.ascontiguousarray)");
  at = valueOf(header, "shape");
  if (at == std::string::npos || header[at] != '(')
    return Status::error(".npy header has no 'shape' tuple");
  end = header.find(')', at);
  if (end == std::string::npos)
    return Status::error(".npy 'shape' tuple is not closed");
  NpyArray array;
  size_t count = 1;
  for (size_t i = at + 1; i < end;) {
    i = header.find_first_not_of(" ,", i);
    if (i >= end)
      break;
    size_t dim = 0, digits = 0;
    for (; i < end && header[i] >= '0' && header[i] <= '9'; ++i, ++digits) {
      if (dim > (std::numeric_limits<size_t>::max() - 9) / 10)
        return Status::error(".npy shape dimension is too large");
      dim = dim * 10 + size_t(header[i] - '0');
    }
    if (digits == 0)
      return Status::error(".npy 'shape' is not a tuple of integers: " +
                           header.substr(at, end - at + 1));
    if (dim != 0 && count > std::numeric_limits<size_t>::max() / 4 / dim)
      return Status::error(".npy shape is too large");
    count *= dim;
    array.shape.push_back(dim);
  }
  const size_t data = start + headerBytes;
  if (bytes.size() - data != count * sizeof(float))
    return Status::error(".npy shape " + describeShape(array.shape) +
                         " needs " + std::to_string(count * sizeof(float)) +
                         " bytes of data, the file has " +
                         std::to_string(bytes.size() - data));
  array.values.resize(count);
  if (count)
    std::memcpy(array.values.data(), bytes.data() + data,
                count * sizeof(float));
  return array;
}

std::vector<uint8_t> writeNpy(std::span<const size_t> shape,
                              std::span<const float> values) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " +
                       describeShape(shape);
  if (shape.size() == 1) // a 1-tuple needs its comma
    header.insert(header.size() - 1, ",");
  header += ", }";
  // Preamble (10 bytes) + header + '\n' is a multiple of 64.
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::vector<uint8_t> out(kMagic, kMagic + kMagicBytes);
  out.push_back(1);
  out.push_back(0);
  out.push_back(uint8_t(header.size() & 0xff));
  out.push_back(uint8_t(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  const auto *data = reinterpret_cast<const uint8_t *>(values.data());
  out.insert(out.end(), data, data + values.size() * sizeof(float));
  return out;
}

std::string describeShape(std::span<const size_t> shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

} // namespace tq::quant
