//===- Rotation.cpp - Orthogonal rotations of a head vector ---------------===//

#include "tq/Quant/Rotation.h"
#include "tq/Quant/Random.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <deque>
#include <map>
#include <mutex>
#include <string>

namespace tq::quant {

namespace {

bool isPowerOfTwo(unsigned n) { return n != 0 && (n & (n - 1)) == 0; }

Status checkSigns(const std::vector<int8_t> &signs, const char *what) {
  for (size_t i = 0; i < signs.size(); ++i)
    if (signs[i] != 1 && signs[i] != -1)
      return Status::error(std::string(what) + "[" + std::to_string(i) +
                           "] is " + std::to_string(int(signs[i])) +
                           "; sign vectors hold +1 or -1");
  return Status::success();
}

/// Unnormalised in-place Walsh-Hadamard butterfly over n = 2^k floats, in
/// the stage order h = 1, 2, 4, ... the reference encoders use.
void butterfly(float *x, unsigned n) {
  for (unsigned h = 1; h < n; h *= 2)
    for (unsigned i = 0; i < n; i += 2 * h)
      for (unsigned j = i; j < i + h; ++j) {
        float a = x[j];
        float b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
}

void multiplySigns(float *x, const std::vector<int8_t> &signs) {
  for (size_t j = 0; j < signs.size(); ++j)
    x[j] *= float(signs[j]);
}

} // namespace

const char *rotationKindName(RotationKind kind) {
  switch (kind) {
  case RotationKind::Identity:
    return "identity";
  case RotationKind::Hadamard:
    return "hadamard";
  case RotationKind::BlockHadamard:
    return "block_hadamard";
  case RotationKind::Haar:
    return "haar";
  }
  return "unknown";
}

unsigned nextPowerOfTwo(unsigned n) { return n <= 1 ? 1 : std::bit_ceil(n); }

Rotation Rotation::identity(unsigned dim) {
  Rotation r;
  r.kind_ = RotationKind::Identity;
  r.dim_ = dim;
  return r;
}

Result<Rotation> Rotation::hadamard(std::vector<int8_t> signs1,
                                    std::vector<int8_t> signs2) {
  unsigned n = unsigned(signs1.size());
  Result<Rotation> r = blockHadamard(n, std::move(signs1), std::move(signs2));
  if (r)
    r->kind_ = RotationKind::Hadamard;
  return r;
}

Result<Rotation> Rotation::seededHadamard(unsigned dim, uint64_t seed,
                                          bool twoSided) {
  SplitMix64 rng(seed);
  std::vector<int8_t> s1(dim), s2;
  for (auto &s : s1)
    s = int8_t(rng.sign());
  if (twoSided) {
    s2.resize(dim);
    for (auto &s : s2)
      s = int8_t(rng.sign());
  }
  Result<Rotation> r = hadamard(std::move(s1), std::move(s2));
  if (r)
    r->seed_ = seed;
  return r;
}

Result<Rotation> Rotation::blockHadamard(unsigned dim,
                                         std::vector<int8_t> signs1,
                                         std::vector<int8_t> signs2) {
  unsigned n = unsigned(signs1.size());
  if (!isPowerOfTwo(n))
    return Status::error("hadamard block size " + std::to_string(n) +
                         " is not a power of two");
  if (dim == 0 || dim % n != 0)
    return Status::error("rotation dim " + std::to_string(dim) +
                         " is not a positive multiple of the hadamard block " +
                         std::to_string(n));
  if (!signs2.empty() && signs2.size() != n)
    return Status::error("second sign vector has " +
                         std::to_string(signs2.size()) + " entries, expected " +
                         std::to_string(n));
  if (Status s = checkSigns(signs1, "signs1"); !s)
    return s;
  if (Status s = checkSigns(signs2, "signs2"); !s)
    return s;
  Rotation r;
  r.kind_ = RotationKind::BlockHadamard;
  r.dim_ = dim;
  r.block_ = n;
  r.signs1_ = std::move(signs1);
  r.signs2_ = std::move(signs2);
  return r;
}

/// The Haar matrix of one (dim, seed), drawn once by whoever needs it
/// first.
struct Rotation::LazyHaar {
  unsigned dim;
  uint64_t seed;
  std::once_flag once;
  std::atomic<bool> drawn{false};
  std::vector<double> q;
};

namespace {

/// Q of a seeded Gaussian matrix, row-major: its columns orthonormalised by
/// modified Gram-Schmidt applied twice (numerically orthogonal to ~1e-15).
/// Gram-Schmidt yields R with a positive diagonal, which is the sign fix
/// that makes Q Haar. A column that comes out degenerate (probability
/// zero) is redrawn from the continuing stream, so every seed gives a
/// rotation.
std::vector<double> drawHaar(unsigned dim, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> g(size_t(dim) * dim);
  for (auto &v : g)
    v = rng.gaussian();
  // q stored column-major during construction: column c at q[c * dim].
  std::vector<double> q(size_t(dim) * dim);
  for (unsigned c = 0; c < dim; ++c) {
    double *v = &q[size_t(c) * dim];
    for (unsigned i = 0; i < dim; ++i)
      v[i] = g[size_t(i) * dim + c];
    for (;;) {
      for (int pass = 0; pass < 2; ++pass)
        for (unsigned p = 0; p < c; ++p) {
          const double *u = &q[size_t(p) * dim];
          double dot = 0;
          for (unsigned i = 0; i < dim; ++i)
            dot += u[i] * v[i];
          for (unsigned i = 0; i < dim; ++i)
            v[i] -= dot * u[i];
        }
      double norm = 0;
      for (unsigned i = 0; i < dim; ++i)
        norm += v[i] * v[i];
      norm = std::sqrt(norm);
      if (norm > 0) {
        for (unsigned i = 0; i < dim; ++i)
          v[i] /= norm;
        break;
      }
      for (unsigned i = 0; i < dim; ++i)
        v[i] = rng.gaussian();
    }
  }
  std::vector<double> rowMajor(size_t(dim) * dim);
  for (unsigned i = 0; i < dim; ++i)
    for (unsigned c = 0; c < dim; ++c)
      rowMajor[size_t(i) * dim + c] = q[size_t(c) * dim + i];
  return rowMajor;
}

} // namespace

Result<Rotation> Rotation::haar(unsigned dim, uint64_t seed) {
  if (dim == 0 || dim > 4096)
    return Status::error("haar rotation dim " + std::to_string(dim) +
                         " is outside [1, 4096]");
  // One holder per (dim, seed) while any rotation uses it; the last few
  // of at most 1024 x 1024 (8 MB each) stay alive after that, so the
  // passes of a compiler, which each rebuild the format, draw it once.
  constexpr unsigned kKeptDim = 1024;
  constexpr size_t kKept = 4;
  static std::mutex mutex;
  static std::map<std::pair<unsigned, uint64_t>, std::weak_ptr<LazyHaar>> live;
  static std::deque<std::shared_ptr<LazyHaar>> recent;
  Rotation r;
  r.kind_ = RotationKind::Haar;
  r.dim_ = dim;
  r.seed_ = seed;
  std::lock_guard<std::mutex> lock(mutex);
  std::weak_ptr<LazyHaar> &slot = live[{dim, seed}];
  r.haar_ = slot.lock();
  if (!r.haar_) {
    r.haar_ = std::make_shared<LazyHaar>();
    r.haar_->dim = dim;
    r.haar_->seed = seed;
    slot = r.haar_;
  }
  if (dim <= kKeptDim) {
    auto it = std::find(recent.begin(), recent.end(), r.haar_);
    if (it != recent.end())
      recent.erase(it);
    recent.push_front(r.haar_);
    if (recent.size() > kKept)
      recent.pop_back();
  }
  return r;
}

bool Rotation::haarDrawn() const {
  return haar_ && haar_->drawn.load(std::memory_order_acquire);
}

const std::vector<double> &Rotation::haarQ() const {
  static const std::vector<double> none;
  if (!haar_)
    return none;
  std::call_once(haar_->once, [&] {
    haar_->q = drawHaar(haar_->dim, haar_->seed);
    haar_->drawn.store(true, std::memory_order_release);
  });
  return haar_->q;
}

namespace {
/// The randomised Hadamard per block: first .* x, butterfly, 1/sqrt(n),
/// second .* x. forward passes (S1, S2); inverse (S2, S1), since H is
/// symmetric and H H = n I.
void hadamardBlocks(std::span<float> x, unsigned block,
                    const std::vector<int8_t> &first,
                    const std::vector<int8_t> &second) {
  const float invSqrt = float(1.0 / std::sqrt(double(block)));
  for (size_t b = 0; b < x.size(); b += block) {
    float *blk = x.data() + b;
    multiplySigns(blk, first);
    butterfly(blk, block);
    for (unsigned j = 0; j < block; ++j)
      blk[j] *= invSqrt;
    multiplySigns(blk, second);
  }
}

/// y = Q^T x (transpose) or y = Q x, accumulated in double.
void applyDense(std::span<float> x, const std::vector<double> &q,
                unsigned dim, bool transpose) {
  std::vector<double> y(dim, 0.0);
  for (unsigned i = 0; i < dim; ++i)
    for (unsigned j = 0; j < dim; ++j)
      y[i] += (transpose ? q[size_t(j) * dim + i] : q[size_t(i) * dim + j]) *
              double(x[j]);
  for (unsigned i = 0; i < dim; ++i)
    x[i] = float(y[i]);
}
} // namespace

void Rotation::forward(std::span<float> x) const {
  switch (kind_) {
  case RotationKind::Identity:
    return;
  case RotationKind::Hadamard:
  case RotationKind::BlockHadamard:
    return hadamardBlocks(x.first(dim_), block_, signs1_, signs2_);
  case RotationKind::Haar:
    return applyDense(x.first(dim_), haarQ(), dim_, /*transpose=*/true);
  }
}

void Rotation::inverse(std::span<float> x) const {
  switch (kind_) {
  case RotationKind::Identity:
    return;
  case RotationKind::Hadamard:
  case RotationKind::BlockHadamard:
    return hadamardBlocks(x.first(dim_), block_, signs2_, signs1_);
  case RotationKind::Haar:
    return applyDense(x.first(dim_), haarQ(), dim_, /*transpose=*/false);
  }
}

std::vector<double> Rotation::matrix() const {
  std::vector<double> m(size_t(dim_) * dim_, 0.0);
  switch (kind_) {
  case RotationKind::Identity:
    for (unsigned i = 0; i < dim_; ++i)
      m[size_t(i) * dim_ + i] = 1.0;
    break;
  case RotationKind::Hadamard:
  case RotationKind::BlockHadamard: {
    double scale = 1.0 / std::sqrt(double(block_));
    for (unsigned b = 0; b < dim_; b += block_)
      for (unsigned i = 0; i < block_; ++i)
        for (unsigned j = 0; j < block_; ++j) {
          double h = (std::popcount(i & j) & 1) ? -scale : scale;
          double s2 = signs2_.empty() ? 1.0 : signs2_[i];
          m[size_t(b + i) * dim_ + b + j] = s2 * h * signs1_[j];
        }
    break;
  }
  case RotationKind::Haar: {
    const std::vector<double> &q = haarQ();
    for (unsigned i = 0; i < dim_; ++i)
      for (unsigned j = 0; j < dim_; ++j)
        m[size_t(i) * dim_ + j] = q[size_t(j) * dim_ + i];
    break;
  }
  }
  return m;
}

std::string Rotation::describe() const {
  std::string s = rotationKindName(kind_);
  switch (kind_) {
  case RotationKind::Identity:
    return s + "<" + std::to_string(dim_) + ">";
  case RotationKind::Hadamard:
    return s + "<" + std::to_string(dim_) +
           (signs2_.empty() ? ", one-sided>" : ", two-sided>");
  case RotationKind::BlockHadamard:
    return s + "<" + std::to_string(dim_) + " in blocks of " +
           std::to_string(block_) +
           (signs2_.empty() ? ", one-sided>" : ", two-sided>");
  case RotationKind::Haar:
    return s + "<" + std::to_string(dim_) + ", seed " + std::to_string(seed_) +
           ">";
  }
  return s;
}

} // namespace tq::quant
