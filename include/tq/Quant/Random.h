//===- Random.h - Seeded, reproducible random streams -----------*- C++ -*-===//
//
// Every random object in tqc (sign vectors, Haar rotations, QJL projections,
// test data) is drawn from an explicit SplitMix64 stream, so a seed fully
// determines it on every platform. The Gaussian draw is the one the golden
// generator in ../shared/golden uses: u = (next >> 11) * 2^-53 and
// Box-Muller sqrt(-2 ln u1) cos(2 pi u2) in double.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_QUANT_RANDOM_H
#define TQ_QUANT_RANDOM_H

#include <cmath>
#include <cstdint>

namespace tq::quant {

/// SplitMix64: state += golden gamma, then the standard finaliser.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }

  /// One standard normal draw (Box-Muller, cosine branch only).
  double gaussian() {
    double u1 = uniform();
    double u2 = uniform();
    // u1 == 0 would give log(0); the golden generator never hits it, and we
    // map it to the smallest positive draw to keep the result finite.
    if (u1 <= 0.0)
      u1 = 0x1.0p-53;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

  /// +1 or -1 with equal probability (top bit of the next draw).
  int sign() { return (next() >> 63) ? -1 : 1; }

private:
  uint64_t state_;
};

} // namespace tq::quant

#endif // TQ_QUANT_RANDOM_H
