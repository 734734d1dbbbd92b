//===- Rotation.h - Orthogonal rotations of a head vector -------*- C++ -*-===//
//
// The rotations a TurboQuant format applies before quantising:
//
//   identity          y = x
//   hadamard          y = S2 .* (H_n (S1 .* x) / sqrt(n)), n a power of two,
//                     S1, S2 sign vectors (S2 = all ones when one-sided)
//   block_hadamard    the same n-point transform applied to each of dim / n
//                     consecutive blocks (tq3_0: n = 32)
//   haar              y = Q^T x, Q the Q factor of a seeded Gaussian matrix
//                     with the sign fix diag(R) > 0 (Haar-distributed)
//
// The Hadamard butterfly runs in float in the order the existing encoders
// use (stages h = 1, 2, 4, ...; x[j] = a + b, x[j + h] = a - b), and the
// 1/sqrt(n) factor is float(1/sqrt(n)), so forward/inverse reproduce their
// outputs bit for bit. All rotations are orthogonal: inverse = transpose.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_QUANT_ROTATION_H
#define TQ_QUANT_ROTATION_H

#include "tq/Quant/Status.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tq::quant {

enum class RotationKind { Identity, Hadamard, BlockHadamard, Haar };

/// Returns "identity", "hadamard", "block_hadamard" or "haar".
const char *rotationKindName(RotationKind kind);

/// An orthogonal transform of R^dim. Immutable once built.
class Rotation {
public:
  static Rotation identity(unsigned dim);
  /// Randomised Hadamard of power-of-two size with literal sign vectors
  /// (entries +1/-1). signs2 may be empty (one-sided).
  static Result<Rotation> hadamard(std::vector<int8_t> signs1,
                                   std::vector<int8_t> signs2 = {});
  /// Randomised Hadamard whose sign vectors are drawn from SplitMix64(seed):
  /// signs1 first, then signs2 when twoSided.
  static Result<Rotation> seededHadamard(unsigned dim, uint64_t seed,
                                         bool twoSided);
  /// Block-diagonal Hadamard: dim / n copies of the n-point randomised
  /// Hadamard with per-block sign vectors signs1 (and optional signs2), n =
  /// signs1.size() a power of two dividing dim.
  static Result<Rotation> blockHadamard(unsigned dim,
                                        std::vector<int8_t> signs1,
                                        std::vector<int8_t> signs2 = {});
  /// Dense Haar rotation drawn from SplitMix64(seed).
  static Result<Rotation> haar(unsigned dim, uint64_t seed);

  RotationKind kind() const { return kind_; }
  unsigned dim() const { return dim_; }
  /// Size of one Hadamard block (dim for hadamard, 0 for identity/haar).
  /// The sign vectors have blockSize() entries and repeat on every block.
  unsigned blockSize() const { return block_; }
  const std::vector<int8_t> &signs1() const { return signs1_; }
  const std::vector<int8_t> &signs2() const { return signs2_; }
  uint64_t seed() const { return seed_; }
  /// Row-major dim x dim matrix of the Haar rotation (empty otherwise):
  /// forward(x) = Q^T x, i.e. y[i] = sum_j Q[j][i] x[j]. Drawn on first
  /// use (O(dim^3)): a rotation that is only described or verified never
  /// builds it. Thread-safe; rotations of one (dim, seed) share it.
  const std::vector<double> &haarQ() const;
  /// True once the Haar matrix has been drawn (false for other kinds).
  bool haarDrawn() const;

  /// In place, x.size() == dim().
  void forward(std::span<float> x) const;
  void inverse(std::span<float> x) const;

  /// The dense dim x dim matrix M with forward(x) = M x (row-major), for
  /// tests and compile-time folding; computed in double.
  std::vector<double> matrix() const;

  /// A one-line description, e.g. "hadamard<128, two-sided>".
  std::string describe() const;

private:
  Rotation() = default;
  RotationKind kind_ = RotationKind::Identity;
  unsigned dim_ = 0;
  unsigned block_ = 0;
  uint64_t seed_ = 0;
  std::vector<int8_t> signs1_;
  std::vector<int8_t> signs2_;
  struct LazyHaar;
  std::shared_ptr<LazyHaar> haar_;
};

/// Smallest power of two >= n (n >= 1).
unsigned nextPowerOfTwo(unsigned n);

} // namespace tq::quant

#endif // TQ_QUANT_ROTATION_H
