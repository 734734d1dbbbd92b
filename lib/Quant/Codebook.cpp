//===- Codebook.cpp - Scalar codebooks and Lloyd-Max design ---------------===//
//
// The Lloyd-Max design works on the exact continuous density, in double:
//
//  * Every cell statistic is a difference of the upper-tail moments
//    G_m(x) = int_x^inf t^m f(t) dt, m = 0, 1, 2. For the Gaussian all three
//    have closed forms (erfc / exp). For the sphere coordinate
//    f(x) = (1 - x^2)^k / Z, k = (d - 3) / 2, G_1 and G_2 are elementary
//    given G_0, and G_0 (an incomplete beta function) is integrated
//    numerically to near machine precision. Tails are evaluated directly
//    (never as 1 - something), so outer cells keep full relative precision.
//  * The fixed point is the classic Lloyd one (thresholds are midpoints of
//    centroids, centroids are conditional means), but plain Lloyd steps
//    contract by only about 1 - O(1/L^2) per step, far too slowly for
//    L = 256 levels. Each iteration therefore also tries a Newton step on
//    c - m(c) = 0 (the Jacobian is tridiagonal), keeping it only when it
//    reduces the fixed-point residual and falling back to the Lloyd step
//    otherwise. The result is the same fixed point, typically reached in
//    under ten iterations.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Codebook.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace tq::quant {

//===----------------------------------------------------------------------===//
// Codebook
//===----------------------------------------------------------------------===//

uint32_t Codebook::quantize(float v) const {
  // upper_bound finds the first threshold t with v < t, i.e. exactly the
  // "ties to the upper cell" rule; none found means the last cell. -0.0 and
  // 0.0 compare equal, so both go above a threshold of 0. A NaN compares
  // false against every threshold and therefore maps to the last index.
  auto it = std::upper_bound(thresholds.begin(), thresholds.end(), v);
  return static_cast<uint32_t>(it - thresholds.begin());
}

float Codebook::maxAbs() const {
  float m = 0.0f;
  for (float c : centroids)
    m = std::max(m, std::fabs(c));
  return m;
}

Result<Codebook> Codebook::literal(std::vector<float> centroids,
                                   std::vector<float> thresholds) {
  const size_t n = centroids.size();
  unsigned bits = 0;
  while (bits <= 8 && (size_t(1) << bits) < n)
    ++bits;
  if (n < 2 || n > 256 || (size_t(1) << bits) != n)
    return Status::error("codebook: expected 2^b centroids with b in [1, 8], "
                         "got " +
                         std::to_string(n));
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(centroids[i]))
      return Status::error("codebook: centroid " + std::to_string(i) +
                           " is not finite");
    if (i > 0 && !(centroids[i - 1] < centroids[i]))
      return Status::error("codebook: centroids must be strictly increasing "
                           "(centroid " +
                           std::to_string(i) + " is not above centroid " +
                           std::to_string(i - 1) + ")");
  }

  if (thresholds.empty()) {
    thresholds.resize(n - 1);
    for (size_t i = 0; i + 1 < n; ++i) {
      float m = (centroids[i] + centroids[i + 1]) / 2.0f;
      // Only overflows for centroids near FLT_MAX; halving first is then
      // exact and stays in range.
      if (!std::isfinite(m))
        m = centroids[i] / 2.0f + centroids[i + 1] / 2.0f;
      thresholds[i] = m;
    }
  } else {
    if (thresholds.size() != n - 1)
      return Status::error("codebook: expected " + std::to_string(n - 1) +
                           " thresholds for " + std::to_string(n) +
                           " centroids, got " +
                           std::to_string(thresholds.size()));
    for (size_t i = 0; i + 1 < n; ++i) {
      // Written so that NaN fails. With strictly increasing centroids this
      // already implies non-decreasing thresholds; the second check states
      // that invariant explicitly.
      if (!(thresholds[i] >= centroids[i] && thresholds[i] <= centroids[i + 1]))
        return Status::error("codebook: threshold " + std::to_string(i) +
                             " must lie between centroids " +
                             std::to_string(i) + " and " +
                             std::to_string(i + 1));
      if (i > 0 && !(thresholds[i - 1] <= thresholds[i]))
        return Status::error("codebook: thresholds must be non-decreasing");
    }
  }

  Codebook cb;
  cb.bits = bits;
  cb.centroids = std::move(centroids);
  cb.thresholds = std::move(thresholds);
  return cb;
}

//===----------------------------------------------------------------------===//
// Lloyd-Max design
//===----------------------------------------------------------------------===//

namespace {

/// Gauss-Legendre rule with NumGL nodes on [-1, 1], computed by Newton's
/// method on the Legendre recurrence (accurate to a few ulps).
constexpr int NumGL = 12;
struct GaussLegendre {
  double node[NumGL];
  double weight[NumGL];

  GaussLegendre() {
    for (int i = 0; i < NumGL; ++i) {
      // Classic starting guess for the i-th largest root of P_n.
      double x = std::cos(M_PI * (i + 0.75) / (NumGL + 0.5));
      double dp = 1.0;
      for (int it = 0; it < 100; ++it) {
        double p0 = 1.0, p1 = x;
        for (int j = 1; j < NumGL; ++j) {
          double p2 = ((2.0 * j + 1.0) * x * p1 - j * p0) / (j + 1.0);
          p0 = p1;
          p1 = p2;
        }
        // p1 = P_n(x), p0 = P_{n-1}(x).
        dp = NumGL * (x * p1 - p0) / (x * x - 1.0);
        double dx = p1 / dp;
        x -= dx;
        if (std::fabs(dx) < 1e-16)
          break;
      }
      node[i] = x;
      weight[i] = 2.0 / ((1.0 - x * x) * dp * dp);
    }
  }

  /// int_a^b fn.
  template <typename Fn> double integrate(double a, double b, Fn fn) const {
    double half = 0.5 * (b - a), mid = 0.5 * (a + b), sum = 0.0;
    for (int i = 0; i < NumGL; ++i)
      sum += weight[i] * fn(mid + half * node[i]);
    return half * sum;
  }
};

/// log(Gamma(z) / Gamma(z + 1/2)) for z >= 1 to about 1e-15 absolute.
/// lgamma(z) - lgamma(z + 1/2) would cancel catastrophically for large z
/// (both terms ~ z log z), and the sphere density's normalisation must be
/// far more accurate than the 1e-12 relative design tolerance.
double logGammaRatioHalf(double z) {
  if (z < 20.0)
    return std::lgamma(z) - std::lgamma(z + 0.5);
  // Stirling: lgamma(z) = (z - 1/2) log z - z + log(2 pi) / 2 + S(z), so
  // the ratio is -log(z) / 2 - z log(1 + 1/(2z)) + 1/2 + S(z) - S(z + 1/2).
  auto series = [](double w) {
    double w2 = 1.0 / (w * w);
    return (1.0 / 12.0 -
            w2 * (1.0 / 360.0 - w2 * (1.0 / 1260.0 - w2 / 1680.0))) /
           w;
  };
  return -0.5 * std::log(z) - z * std::log1p(0.5 / z) + 0.5 + series(z) -
         series(z + 0.5);
}

/// A symmetric density with its upper-tail moments. All values are for the
/// normalised density (total mass 1).
///
/// The sphere's tail mass G_0 is the one quantity without an elementary
/// form (it is an incomplete beta function). Cell masses are differences of
/// G_0 values, and a cell's conditional mean is off by (mean) x (relative
/// error of its mass), so G_0 must be accurate to near machine precision
/// even far in the tail. It is integrated numerically in theta = asin(x),
/// where the integrand cos^{d-2}(theta) is analytic on [0, pi/2]: fixed
/// panels of width ~sigma/4 with precomputed tail sums (summed from the far
/// end, so small tails keep their relative precision), plus one partial
/// panel per query.
class Density {
public:
  Density(CodebookDistribution dist, unsigned dim)
      : dist_(dist), d_(double(dim)), sigma_(1.0 / std::sqrt(double(dim))) {
    if (dist_ != CodebookDistribution::Sphere)
      return;
    k_ = (d_ - 3.0) / 2.0;
    // log Z with Z = int_{-1}^{1} (1 - x^2)^k dx = B(1/2, k + 1).
    logZ_ = 0.5 * std::log(M_PI) + logGammaRatioHalf(k_ + 1.0);
    // Beyond theta = 40 sigma the integrand is below e^-700 of its peak.
    double thetaEnd = std::min(M_PI / 2.0, 40.0 * sigma_);
    size_t panels = size_t(std::ceil(thetaEnd / (0.25 * sigma_)));
    panelWidth_ = thetaEnd / double(panels);
    tailSums_.assign(panels + 1, 0.0);
    for (size_t j = panels; j-- > 0;)
      tailSums_[j] =
          tailSums_[j + 1] +
          thetaIntegral(double(j) * panelWidth_, double(j + 1) * panelWidth_);
  }

  /// Standard deviation 1/sqrt(d) of both distributions.
  double sigma() const { return sigma_; }
  /// Largest x with positive density (infinity for the Gaussian).
  double supportEnd() const {
    return dist_ == CodebookDistribution::Sphere
               ? 1.0
               : std::numeric_limits<double>::infinity();
  }
  /// E[x^2] over the upper half line, i.e. half the variance 1/d.
  double halfSecondMoment() const { return 0.5 / d_; }

  double pdf(double x) const {
    x = std::fabs(x);
    if (dist_ == CodebookDistribution::Gaussian) {
      double u = x / sigma_;
      return std::exp(-0.5 * u * u) / (sigma_ * std::sqrt(2.0 * M_PI));
    }
    if (x >= 1.0)
      return 0.0;
    return std::exp(k_ * std::log1p(-x * x) - logZ_);
  }

  /// Upper-tail moments G_m(x) = int_x^inf t^m f(t) dt for x >= 0.
  struct Tail {
    double g0, g1, g2;
  };
  Tail tail(double x) const {
    if (!(x < supportEnd()))
      return {0.0, 0.0, 0.0};
    if (dist_ == CodebookDistribution::Gaussian) {
      double u = x / sigma_;
      double phi = std::exp(-0.5 * u * u) / std::sqrt(2.0 * M_PI);
      double q = 0.5 * std::erfc(u / std::sqrt(2.0));
      // int_u^inf s phi = phi(u); int_u^inf s^2 phi = u phi(u) + Q(u).
      return {q, sigma_ * phi, sigma_ * sigma_ * (q + u * phi)};
    }
    // Sphere: with g = 1 - x^2,
    //   G_1 = g^{k+1} / (2 (k + 1) Z),
    //   G_2 = (G_0 + x g^{k+1} / Z) / (2k + 3)  (integration by parts).
    double gk1 = std::exp((k_ + 1.0) * std::log1p(-x * x) - logZ_);
    double g0 = sphereTailMass(x);
    return {g0, gk1 / (2.0 * (k_ + 1.0)), (g0 + x * gk1) / (2.0 * k_ + 3.0)};
  }

private:
  /// int_a^b cos^{d-2}(theta) / Z dtheta, i.e. the mass of x in
  /// [sin a, sin b]. cos^2 = 1 - sin^2 keeps full relative precision for
  /// small theta, where cos itself would round to 1.
  double thetaIntegral(double a, double b) const {
    return gl_.integrate(a, b, [&](double theta) {
      double s = std::sin(theta);
      return std::exp((k_ + 0.5) * std::log1p(-s * s) - logZ_);
    });
  }

  /// G_0(x) for 0 <= x < 1.
  double sphereTailMass(double x) const {
    double theta = std::asin(x);
    size_t panels = tailSums_.size() - 1;
    double j = std::floor(theta / panelWidth_);
    if (j >= double(panels))
      return 0.0; // Past the last panel: below e^-700.
    size_t jj = size_t(j);
    return tailSums_[jj + 1] +
           thetaIntegral(theta, double(jj + 1) * panelWidth_);
  }

  CodebookDistribution dist_;
  double d_;
  double sigma_;
  // Sphere only.
  double k_ = 0.0;
  double logZ_ = 0.0;
  double panelWidth_ = 0.0;
  std::vector<double> tailSums_; ///< tailSums_[j] = G_0(sin(j * width)).
  GaussLegendre gl_;
};

/// Per-cell moments and densities at the thresholds, for a sorted centroid
/// vector.
struct CellStats {
  std::vector<double> thresholds; ///< L - 1 midpoints.
  std::vector<double> pdfAt;      ///< f at each threshold.
  std::vector<double> mass;       ///< P_i = int_cell f.
  std::vector<double> first;      ///< int_cell x f.
  std::vector<double> second;     ///< int_cell x^2 f.
  std::vector<double> mean;       ///< first / mass (c_i if the mass is 0).
  bool allCellsHaveMass = true;
};

void computeCellStats(const Density &density, const std::vector<double> &c,
                      CellStats &s) {
  const size_t n = c.size();
  s.thresholds.resize(n - 1);
  s.pdfAt.resize(n - 1);
  std::vector<Density::Tail> tails(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) {
    double t = 0.5 * (c[i] + c[i + 1]);
    s.thresholds[i] = t;
    s.pdfAt[i] = density.pdf(t);
    tails[i] = density.tail(std::fabs(t));
  }
  const double inf = std::numeric_limits<double>::infinity();
  const Density::Tail none{0.0, 0.0, 0.0};
  const double h2 = density.halfSecondMoment();

  s.mass.resize(n);
  s.first.resize(n);
  s.second.resize(n);
  s.mean.resize(n);
  s.allCellsHaveMass = true;
  for (size_t i = 0; i < n; ++i) {
    double lo = i == 0 ? -inf : s.thresholds[i - 1];
    double hi = i + 1 == n ? inf : s.thresholds[i];
    const Density::Tail &tlo = i == 0 ? none : tails[i - 1];
    const Density::Tail &thi = i + 1 == n ? none : tails[i];
    double m0, m1, m2;
    if (lo >= 0.0) {
      // Upper half: differences of two small tails.
      m0 = tlo.g0 - thi.g0;
      m1 = tlo.g1 - thi.g1;
      m2 = tlo.g2 - thi.g2;
    } else if (hi <= 0.0) {
      // Lower half, by reflection x -> -x (tails hold values at |t|).
      m0 = thi.g0 - tlo.g0;
      m1 = -(thi.g1 - tlo.g1);
      m2 = thi.g2 - tlo.g2;
    } else {
      // The cell straddles 0: [lo, 0] + [0, hi]. G_1 is even, so the first
      // moment is G_1(|lo|) - G_1(hi).
      m0 = (0.5 - tlo.g0) + (0.5 - thi.g0);
      m1 = tlo.g1 - thi.g1;
      m2 = (h2 - tlo.g2) + (h2 - thi.g2);
    }
    s.mass[i] = m0;
    s.first[i] = m1;
    s.second[i] = m2;
    if (m0 > 0.0 && std::isfinite(m1 / m0)) {
      // A conditional mean lies inside its cell; clamp away rounding.
      s.mean[i] = std::clamp(m1 / m0, lo, hi);
    } else {
      s.mean[i] = c[i];
      s.allCellsHaveMass = false;
    }
  }
}

double maxAbsDiff(const std::vector<double> &a, const std::vector<double> &b) {
  double r = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    r = std::max(r, std::fabs(a[i] - b[i]));
  return r;
}

bool strictlyIncreasingFinite(const std::vector<double> &c) {
  for (size_t i = 0; i < c.size(); ++i) {
    if (!std::isfinite(c[i]))
      return false;
    if (i > 0 && !(c[i - 1] < c[i]))
      return false;
  }
  return true;
}

/// Newton step for F(c) = c - m(c) = 0 at c, given the stats at c. The
/// Jacobian I - dm/dc is tridiagonal:
///   dm_i/dt_i     = f(t_i) (t_i - m_i) / P_i,
///   dm_i/dt_{i-1} = f(t_{i-1}) (m_i - t_{i-1}) / P_i,
/// and every t_i = (c_i + c_{i+1}) / 2. Returns false if the system is
/// singular.
bool newtonStep(const std::vector<double> &c, const CellStats &s,
                std::vector<double> &out) {
  const size_t n = c.size();
  std::vector<double> lower(n, 0.0), diag(n, 1.0), upper(n, 0.0), rhs(n);
  for (size_t i = 0; i < n; ++i) {
    double p = s.mass[i];
    if (!(p > 0.0))
      return false;
    double m = s.mean[i];
    if (i + 1 < n) {
      double alpha = s.pdfAt[i] * (s.thresholds[i] - m) / p;
      diag[i] -= 0.5 * alpha;
      upper[i] = -0.5 * alpha;
    }
    if (i > 0) {
      double beta = s.pdfAt[i - 1] * (m - s.thresholds[i - 1]) / p;
      diag[i] -= 0.5 * beta;
      lower[i] = -0.5 * beta;
    }
    rhs[i] = -(c[i] - m);
  }
  // Thomas algorithm.
  for (size_t i = 1; i < n; ++i) {
    if (diag[i - 1] == 0.0)
      return false;
    double w = lower[i] / diag[i - 1];
    diag[i] -= w * upper[i - 1];
    rhs[i] -= w * rhs[i - 1];
  }
  if (diag[n - 1] == 0.0)
    return false;
  out.resize(n);
  out[n - 1] = rhs[n - 1] / diag[n - 1];
  for (size_t i = n - 1; i-- > 0;)
    out[i] = (rhs[i] - upper[i] * out[i + 1]) / diag[i];
  for (size_t i = 0; i < n; ++i)
    out[i] += c[i];
  return true;
}

/// The x >= 0 with G_0(x) = q, for q in (0, 1/2], by safeguarded Newton.
double upperQuantile(const Density &density, double q) {
  double lo = 0.0;
  double hi = std::min(density.supportEnd(), 40.0 * density.sigma());
  double x = density.sigma();
  for (int it = 0; it < 200; ++it) {
    double g = density.tail(x).g0 - q;
    if (g > 0.0)
      lo = x; // Too much mass above x: move right.
    else
      hi = x;
    double f = density.pdf(x);
    double next = f > 0.0 ? x + g / f : 0.5 * (lo + hi);
    if (!(next > lo && next < hi))
      next = 0.5 * (lo + hi);
    if (std::fabs(next - x) < 1e-15 * density.sigma())
      return next;
    x = next;
  }
  return x;
}

} // namespace

Result<LloydMaxDesign> designLloydMax(CodebookDistribution dist, unsigned dim,
                                      unsigned bits) {
  if (bits < 1 || bits > 8)
    return Status::error("Lloyd-Max design: bits must be in [1, 8], got " +
                         std::to_string(bits));
  if (dist == CodebookDistribution::Sphere && dim < 3)
    return Status::error("Lloyd-Max design: the sphere distribution needs "
                         "dim >= 3, got " +
                         std::to_string(dim));
  if (dim < 1)
    return Status::error("Lloyd-Max design: dim must be at least 1");

  const Density density(dist, dim);
  const size_t n = size_t(1) << bits;
  const double tol = 1e-12 * density.sigma();
  constexpr unsigned maxIterations = 20000;

  // Start from the quantiles: centroid i at the (i + 0.5) / n quantile,
  // placed symmetrically (the density is even).
  std::vector<double> c(n);
  for (size_t i = n / 2; i < n; ++i) {
    double x = upperQuantile(density, (double(n - i) - 0.5) / double(n));
    c[i] = x;
    c[n - 1 - i] = -x;
  }

  LloydMaxDesign design;
  CellStats stats, trial;
  std::vector<double> candidate;
  computeCellStats(density, c, stats);
  unsigned iterations = 0;
  while (iterations < maxIterations) {
    double residual = maxAbsDiff(c, stats.mean);
    ++iterations;
    if (residual < tol) {
      // The Lloyd step would move no centroid by more than the tolerance.
      c = stats.mean;
      break;
    }
    // Prefer Newton when it keeps the centroids ordered and shrinks the
    // residual; a Lloyd step (c = m(c)) never increases the distortion, so
    // it is the safe fallback.
    if (newtonStep(c, stats, candidate) &&
        strictlyIncreasingFinite(candidate)) {
      computeCellStats(density, candidate, trial);
      if (trial.allCellsHaveMass &&
          maxAbsDiff(candidate, trial.mean) < residual) {
        c.swap(candidate);
        std::swap(stats, trial);
        continue;
      }
    }
    c = stats.mean;
    computeCellStats(density, c, stats);
  }

  // Symmetrise: the exact design is odd, c_i = -c_{n-1-i}.
  for (size_t i = 0; i < n / 2; ++i) {
    double v = 0.5 * (c[n - 1 - i] - c[i]);
    c[n - 1 - i] = v;
    c[i] = -v;
  }
  computeCellStats(density, c, stats);

  // E[(x - Q(x))^2] = sum over cells of int (x - c_i)^2 f.
  double mse = 0.0;
  for (size_t i = 0; i < n; ++i)
    mse += stats.second[i] - 2.0 * c[i] * stats.first[i] +
           c[i] * c[i] * stats.mass[i];

  design.centroids = std::move(c);
  design.thresholds = std::move(stats.thresholds);
  design.mse = mse;
  design.iterations = iterations;
  return design;
}

Result<Codebook> lloydMaxCodebook(CodebookDistribution dist, unsigned dim,
                                  unsigned bits) {
  Result<LloydMaxDesign> design = designLloydMax(dist, dim, bits);
  if (!design)
    return design.status();
  std::vector<float> centroids(design->centroids.begin(),
                               design->centroids.end());
  std::vector<float> thresholds(design->thresholds.begin(),
                                design->thresholds.end());
  // Rounding is monotone, so the float thresholds still lie between their
  // float centroids; literal() re-checks every invariant.
  return Codebook::literal(std::move(centroids), std::move(thresholds));
}

} // namespace tq::quant
