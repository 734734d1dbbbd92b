//===- FuzzInput.h - Reading a fuzzer's bytes as values ---------*- C++ -*-===//
//
// The fuzz targets consume their input front to back; past the end every
// read yields zero, so any input is a complete, deterministic case.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_FUZZ_FUZZINPUT_H
#define TQ_FUZZ_FUZZINPUT_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tq::fuzz {

class FuzzInput {
public:
  FuzzInput(const uint8_t *data, size_t size) : data_(data), size_(size) {}

  template <typename T> T take() {
    T value{};
    size_t n = sizeof(T) < remaining() ? sizeof(T) : remaining();
    std::memcpy(&value, data_ + at_, n);
    at_ += n;
    return value;
  }
  /// A value in [0, bound); any value where bound is 0 (a bound that
  /// wrapped around).
  uint32_t below(uint32_t bound) {
    uint32_t v = take<uint32_t>();
    return bound ? v % bound : v;
  }
  /// Mostly `right` (seven draws in eight), sometimes any value.
  template <typename T> T mostly(T right) {
    return below(8) ? right : take<T>();
  }
  /// A scale, soft-cap, bias or sink: mostly a small non-negative value,
  /// sometimes NaN, infinity, -1 or any bits.
  float anyFloat() {
    switch (below(6)) {
    case 0:
      return NAN;
    case 1:
      return INFINITY;
    case 2:
      return -1.0f;
    case 3:
      return take<float>();
    default:
      return float(below(100)) / 10.0f;
    }
  }
  size_t remaining() const { return size_ - at_; }
  const uint8_t *rest() const { return data_ + at_; }

private:
  const uint8_t *data_;
  size_t size_, at_ = 0;
};

} // namespace tq::fuzz

#endif // TQ_FUZZ_FUZZINPUT_H
