// Tests of the experiments' comparisons: Student's t distribution and the paired t-test (E3, E5).
#pragma once
#include <vector>

namespace svattn::experiments {

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
