// The one statistics unit (docs/api.md "Support layer"): order statistics of samples (median,
// linear-interpolated quantile, nearest-rank percentile, mean, sample sd, maximum, the min / median
// / max summary of a ratio) and the inference of the experiments' reports (the 95 % CI of a mean,
// Student's t from the incomplete beta function, the paired t-test). Header-only.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <utility>
#include <vector>

#include "svattn/errors.h"

namespace svattn::support {

/// The p-quantile by linear interpolation between the order statistics at (n - 1) p (p clamped
/// to [0, 1]); NaN when empty.
inline double quantile(std::vector<double> v, double p) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(p, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  if (frac == 0.0) return v[lo];
  return v[lo] + frac * (v[hi] - v[lo]);
}

/// Median: quantile(v, 0.5), the two middle values' midpoint for an even count (computed as
/// a + (b - a) / 2); NaN when empty.
inline double median(std::vector<double> v) { return quantile(std::move(v), 0.5); }

/// The q-quantile by the nearest-rank rule: the ceil(q n)-th smallest value (q in [0, 1]; q = 0
/// gives the minimum); NaN when empty.
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(q * static_cast<double>(v.size()));
  const std::size_t k = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return v[std::min(k, v.size() - 1)];
}

/// Arithmetic mean (left-to-right sum); NaN when empty.
inline double mean(const std::vector<double>& v) {
  if (v.empty()) return std::nan("");
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

/// Sample standard deviation (n - 1 in the denominator; 0 for fewer than 2 values).
inline double sd(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

/// Largest element; NaN when empty.
inline double maximum(const std::vector<double>& v) {
  if (v.empty()) return std::nan("");
  return *std::max_element(v.begin(), v.end());
}

/// Minimum, median and maximum of a sample (NaN when empty).
struct Spread {
  double min = std::nan("");
  double median = std::nan("");
  double max = std::nan("");
};

inline Spread spread(const std::vector<double>& v) {
  if (v.empty()) return {};
  const auto mm = std::minmax_element(v.begin(), v.end());
  return {*mm.first, median(v), *mm.second};
}

/// The element-wise ratios a[i] / b[i] over the common length.
inline std::vector<double> ratios(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) r.push_back(a[i] / b[i]);
  return r;
}

/// Two-sided 97.5 % quantile of Student's t with `dof` degrees of freedom (table, exact to 3
/// digits; linear between 30, 40, 60 and 120, then 1.960); NaN for dof < 1.
inline double student_t975(int dof) {
  static const double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262,
                                  2.228,  2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101,
                                  2.093,  2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052,
                                  2.048,  2.045, 2.042};
  if (dof < 1) return std::nan("");
  if (dof <= 30) return kTable[dof - 1];
  if (dof <= 40) return 2.042 + (2.021 - 2.042) * (dof - 30) / 10.0;
  if (dof <= 60) return 2.021 + (2.000 - 2.021) * (dof - 40) / 20.0;
  if (dof <= 120) return 2.000 + (1.980 - 2.000) * (dof - 60) / 60.0;
  return 1.960;
}

/// Mean and the half width of its two-sided 95 % confidence interval (Student t with n-1 degrees
/// of freedom; half width 0 for n = 1, NaN mean for n = 0).
struct MeanCi {
  double mean = 0;
  double half_width = 0;
  int n = 0;
};

inline MeanCi mean_ci95(const std::vector<double>& v) {
  MeanCi r;
  r.n = static_cast<int>(v.size());
  r.mean = mean(v);
  if (r.n < 2) return r;
  double ss = 0;
  for (double x : v) ss += (x - r.mean) * (x - r.mean);
  const double sdev = std::sqrt(ss / static_cast<double>(r.n - 1));
  r.half_width = student_t975(r.n - 1) * sdev / std::sqrt(static_cast<double>(r.n));
  return r;
}

namespace detail {

// Continued fraction of I_x(a, b) by the modified Lentz method (Numerical Recipes §6.4).
inline double beta_continued_fraction(double a, double b, double x) {
  constexpr int kMaxIterations = 500;
  constexpr double kEps = 1e-15;
  constexpr double kTiny = 1e-300;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < kEps) return h;
  }
  return h;
}

}  // namespace detail

/// Regularised incomplete beta function I_x(a, b) (continued fraction, Numerical Recipes §6.4),
/// a, b > 0, x in [0, 1]; throws InvalidArgument outside.
inline double regularized_incomplete_beta(double a, double b, double x) {
  if (!(a > 0 && b > 0)) throw InvalidArgument("incomplete beta: a and b must be > 0");
  if (!(x >= 0 && x <= 1)) throw InvalidArgument("incomplete beta: x must be in [0, 1]");
  if (x == 0 || x == 1) return x;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  if (x < (a + 1) / (a + b + 2)) return front * detail::beta_continued_fraction(a, b, x) / a;
  return 1 - front * detail::beta_continued_fraction(b, a, 1 - x) / b;
}

/// CDF of Student's t with `dof` > 0 degrees of freedom: 1 - I_{dof/(dof+t²)}(dof/2, 1/2) / 2 for
/// t > 0 (symmetric below).
inline double student_t_cdf(double t, double dof) {
  if (!(dof > 0)) throw InvalidArgument("student_t_cdf: dof must be > 0");
  if (std::isnan(t)) return t;
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  const double tail = 0.5 * regularized_incomplete_beta(dof / 2, 0.5, dof / (dof + t * t));
  return t > 0 ? 1 - tail : tail;
}

struct PairedTTest {
  int n = 0;
  double mean_difference = 0;  ///< mean of a_i - b_i
  double sd_difference = 0;    ///< sample sd of the differences
  double t = 0;
  double dof = 0;
  double p_two_sided = 0;      ///< NaN when n < 2 or every difference is equal
};

/// Paired t-test of a against b (same length >= 1; throws InvalidArgument otherwise).
inline PairedTTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty())
    throw InvalidArgument("paired_t_test: the samples must have the same length >= 1");
  PairedTTest r;
  r.n = static_cast<int>(a.size());
  std::vector<double> d(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  r.mean_difference = mean(d);
  r.sd_difference = sd(d);
  r.dof = r.n - 1;
  if (r.n < 2 || r.sd_difference == 0) {
    r.t = std::nan("");
    r.p_two_sided = std::nan("");
    return r;
  }
  r.t = r.mean_difference / (r.sd_difference / std::sqrt(static_cast<double>(r.n)));
  r.p_two_sided = regularized_incomplete_beta(r.dof / 2, 0.5, r.dof / (r.dof + r.t * r.t));
  return r;
}

}  // namespace svattn::support
