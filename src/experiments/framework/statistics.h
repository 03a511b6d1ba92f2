// Descriptive statistics of the experiments' measurements (mean, sd, quantiles, the 95 % CI of a
// mean) and the paired t-test of two methods (E3, E5), with Student's t from the incomplete beta function.
#pragma once
#include <vector>

namespace svattn::experiments {

double mean_of(const std::vector<double>& v);
/// Sample standard deviation (0 for fewer than 2 values).
double sd_of(const std::vector<double>& v);
/// Median (mean of the two middle values for an even count); NaN for an empty vector.
double median_of(std::vector<double> v);
/// Linear-interpolated quantile p in [0, 1]; NaN for an empty vector.
double quantile_of(std::vector<double> v, double p);
/// Largest element; NaN for an empty vector.
double max_of(const std::vector<double>& v);

/// Mean and the half width of its two-sided 95 % confidence interval (Student t with n-1 degrees
/// of freedom; half width 0 for n = 1, NaN mean for n = 0).
struct MeanCi {
  double mean = 0;
  double half_width = 0;
  int n = 0;
};
MeanCi mean_ci95(const std::vector<double>& v);
/// Two-sided 97.5 % quantile of Student's t with `dof` degrees of freedom (table, exact to 3 digits).
double student_t975(int dof);

/// Regularised incomplete beta function I_x(a, b) (continued fraction, Numerical Recipes §6.4),
/// a, b > 0, x in [0, 1].
double regularized_incomplete_beta(double a, double b, double x);
/// CDF of Student's t with `dof` > 0 degrees of freedom: 1 - I_{dof/(dof+t²)}(dof/2, 1/2) / 2 for t > 0.
double student_t_cdf(double t, double dof);

struct PairedTTest {
  int n = 0;
  double mean_difference = 0;  ///< mean of a_i - b_i
  double sd_difference = 0;    ///< sample sd of the differences
  double t = 0;
  double dof = 0;
  double p_two_sided = 0;      ///< NaN when n < 2 or every difference is equal
};
/// Paired t-test of a against b (same length >= 1).
PairedTTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace svattn::experiments
