// Descriptive statistics, the 95 % CI of a mean and the paired t-test (framework/statistics.h).
#include "experiments/framework/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "svattn/errors.h"

namespace svattn::experiments {

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double quantile_of(std::vector<double> v, double p) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(p, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  if (frac == 0.0) return v[lo];
  return v[lo] + frac * (v[hi] - v[lo]);
}

double sd_of(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

double median_of(std::vector<double> v) { return quantile_of(std::move(v), 0.5); }

double max_of(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  return *std::max_element(v.begin(), v.end());
}

double student_t975(int dof) {
  static const double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262,
                                  2.228,  2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101,
                                  2.093,  2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052,
                                  2.048,  2.045, 2.042};
  if (dof < 1) return std::numeric_limits<double>::quiet_NaN();
  if (dof <= 30) return kTable[dof - 1];
  if (dof <= 40) return 2.042 + (2.021 - 2.042) * (dof - 30) / 10.0;
  if (dof <= 60) return 2.021 + (2.000 - 2.021) * (dof - 40) / 20.0;
  if (dof <= 120) return 2.000 + (1.980 - 2.000) * (dof - 60) / 60.0;
  return 1.960;
}

MeanCi mean_ci95(const std::vector<double>& v) {
  MeanCi r;
  r.n = static_cast<int>(v.size());
  r.mean = mean_of(v);
  if (r.n < 2) return r;
  double ss = 0;
  for (double x : v) ss += (x - r.mean) * (x - r.mean);
  const double sd = std::sqrt(ss / static_cast<double>(r.n - 1));
  r.half_width = student_t975(r.n - 1) * sd / std::sqrt(static_cast<double>(r.n));
  return r;
}

namespace {

// Continued fraction of I_x(a, b) by the modified Lentz method (Numerical Recipes §6.4).
double beta_continued_fraction(double a, double b, double x) {
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

}  // namespace

double regularized_incomplete_beta(double a, double b, double x) {
  if (!(a > 0 && b > 0)) throw InvalidArgument("incomplete beta: a and b must be > 0");
  if (!(x >= 0 && x <= 1)) throw InvalidArgument("incomplete beta: x must be in [0, 1]");
  if (x == 0 || x == 1) return x;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
  return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}

double student_t_cdf(double t, double dof) {
  if (!(dof > 0)) throw InvalidArgument("student_t_cdf: dof must be > 0");
  if (std::isnan(t)) return t;
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  const double tail = 0.5 * regularized_incomplete_beta(dof / 2, 0.5, dof / (dof + t * t));
  return t > 0 ? 1 - tail : tail;
}

PairedTTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty())
    throw InvalidArgument("paired_t_test: the samples must have the same length >= 1");
  PairedTTest r;
  r.n = static_cast<int>(a.size());
  std::vector<double> d(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  r.mean_difference = mean_of(d);
  r.sd_difference = sd_of(d);
  r.dof = r.n - 1;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (r.n < 2 || r.sd_difference == 0) {
    r.t = nan;
    r.p_two_sided = nan;
    return r;
  }
  r.t = r.mean_difference / (r.sd_difference / std::sqrt(static_cast<double>(r.n)));
  r.p_two_sided = regularized_incomplete_beta(r.dof / 2, 0.5, r.dof / (r.dof + r.t * r.t));
  return r;
}

}  // namespace svattn::experiments
