// The one statistics unit (support/statistics.h): each function against known values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "support/statistics.h"
#include "svattn/errors.h"

namespace {

using namespace svattn::support;

TEST(SupportStatistics, QuantileInterpolatesLinearlyAndClamps) {
  const std::vector<double> v{5, 1, 4, 2, 3};
  EXPECT_EQ(quantile(v, 0.0), 1);
  EXPECT_EQ(quantile(v, 0.25), 2);   // position (5 - 1) 0.25 = 1
  EXPECT_EQ(quantile(v, 0.1), 1.4);  // position 0.4: 1 + 0.4 (2 - 1)
  EXPECT_EQ(quantile(v, 0.5), 3);
  EXPECT_EQ(quantile(v, 0.9), 4.6);  // position 3.6: 4 + 0.6 (5 - 4)
  EXPECT_EQ(quantile(v, 1.0), 5);
  EXPECT_EQ(quantile(v, -1.0), 1);
  EXPECT_EQ(quantile(v, 2.0), 5);
  EXPECT_EQ(quantile({7}, 0.3), 7);
  EXPECT_TRUE(std::isnan(quantile({}, 0.5)));
}

TEST(SupportStatistics, MedianOfOddEvenAndEmpty) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({5}), 5);
  EXPECT_EQ(median({1, 2}), 1.5);
  EXPECT_EQ(median({0.1, 0.2}), 0.1 + (0.2 - 0.1) * 0.5);  // a + (b - a) / 2, bit for bit
  EXPECT_TRUE(std::isnan(median({})));
}

TEST(SupportStatistics, PercentileIsTheNearestRank) {
  const std::vector<double> v{5, 1, 4, 2, 3, 10, 9, 8, 7, 6};
  EXPECT_EQ(percentile(v, 0.0), 1);
  EXPECT_EQ(percentile(v, 0.1), 1);
  EXPECT_EQ(percentile(v, 0.5), 5);
  EXPECT_EQ(percentile(v, 0.95), 10);
  EXPECT_EQ(percentile(v, 1.0), 10);
  EXPECT_TRUE(std::isnan(percentile({}, 0.5)));
}

TEST(SupportStatistics, MeanSpreadAndRatios) {
  EXPECT_EQ(mean({1, 2, 3, 6}), 3);
  EXPECT_TRUE(std::isnan(mean({})));
  const Spread s = spread({2, 8, 4});
  EXPECT_EQ(s.min, 2);
  EXPECT_EQ(s.median, 4);
  EXPECT_EQ(s.max, 8);
  EXPECT_TRUE(std::isnan(spread({}).median));
  EXPECT_EQ(ratios({2, 9, 1}, {1, 3}), (std::vector<double>{2, 3}));
}

TEST(SupportStatistics, SampleSdAndMaximum) {
  EXPECT_EQ(sd({2, 4, 4, 4, 5, 5, 7, 9}), std::sqrt(32.0 / 7));  // squares sum 32, n - 1 = 7
  EXPECT_EQ(sd({1, 2, 3}), 1);
  EXPECT_EQ(sd({5}), 0);
  EXPECT_EQ(sd({}), 0);
  EXPECT_EQ(maximum({3, -1, 8, 2}), 8);
  EXPECT_TRUE(std::isnan(maximum({})));
}

TEST(SupportStatistics, StudentT975IsTheTableAndInterpolatesBeyond30) {
  EXPECT_EQ(student_t975(1), 12.706);
  EXPECT_EQ(student_t975(2), 4.303);
  EXPECT_EQ(student_t975(10), 2.228);
  EXPECT_EQ(student_t975(30), 2.042);
  EXPECT_NEAR(student_t975(35), 2.0315, 1e-12);
  EXPECT_NEAR(student_t975(90), 1.990, 1e-12);
  EXPECT_EQ(student_t975(1000), 1.960);
  EXPECT_TRUE(std::isnan(student_t975(0)));
}

TEST(SupportStatistics, MeanCi95) {
  // {1, 2, 3}: mean 2, sd 1, half width t975(2) / sqrt(3) = 4.303 / sqrt(3).
  const MeanCi r = mean_ci95({1, 2, 3});
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.mean, 2);
  EXPECT_NEAR(r.half_width, 4.303 / std::sqrt(3.0), 1e-15);
  EXPECT_NEAR(r.half_width, 2.484338, 1e-6);
  const MeanCi one = mean_ci95({4});
  EXPECT_EQ(one.mean, 4);
  EXPECT_EQ(one.half_width, 0);
  EXPECT_TRUE(std::isnan(mean_ci95({}).mean));
}

TEST(SupportStatistics, IncompleteBetaAndTCdfMatchClosedForms) {
  for (double x : {0.0, 0.1, 0.37, 0.9, 1.0})
    EXPECT_NEAR(regularized_incomplete_beta(1, 1, x), x, 1e-13);
  EXPECT_NEAR(regularized_incomplete_beta(2.5, 2.5, 0.5), 0.5, 1e-13);
  // I_x(a, 1) = x^a
  EXPECT_NEAR(regularized_incomplete_beta(3.0, 1.0, 0.7), std::pow(0.7, 3), 1e-13);
  EXPECT_THROW(regularized_incomplete_beta(0, 1, 0.5), svattn::InvalidArgument);
  EXPECT_THROW(regularized_incomplete_beta(1, 1, 1.5), svattn::InvalidArgument);
  // dof 1 is the Cauchy distribution; dof 2 has F(t) = 1/2 + t / (2 sqrt(2 + t^2)).
  for (double t : {-3.0, -0.4, 0.0, 1.0, 12.0}) {
    EXPECT_NEAR(student_t_cdf(t, 1), 0.5 + std::atan(t) / M_PI, 1e-12) << t;
    EXPECT_NEAR(student_t_cdf(t, 2), 0.5 + t / (2 * std::sqrt(2 + t * t)), 1e-12) << t;
  }
  // Tabulated 97.5 % quantiles: t(4) = 2.776, t(10) = 2.228.
  EXPECT_NEAR(student_t_cdf(2.776445, 4), 0.975, 1e-6);
  EXPECT_NEAR(student_t_cdf(2.228139, 10), 0.975, 1e-6);
  EXPECT_EQ(student_t_cdf(std::numeric_limits<double>::infinity(), 3), 1.0);
  EXPECT_THROW(student_t_cdf(1, 0), svattn::InvalidArgument);
}

TEST(SupportStatistics, PairedTTestAgainstHandComputedValues) {
  // Differences 0.1, -0.2, 0.3, 0.4: mean 0.15, sd sqrt(0.07), t = 0.15 / (sqrt(0.07) / 2), dof 3.
  const auto r = paired_t_test({1, 2, 3, 4}, {0.9, 2.2, 2.7, 3.6});
  EXPECT_EQ(r.n, 4);
  EXPECT_EQ(r.dof, 3);
  EXPECT_NEAR(r.mean_difference, 0.15, 1e-12);
  EXPECT_NEAR(r.sd_difference, std::sqrt(0.07), 1e-12);
  EXPECT_NEAR(r.t, 0.3 / std::sqrt(0.07), 1e-12);
  EXPECT_NEAR(r.p_two_sided, 2 * (1 - student_t_cdf(r.t, 3)), 1e-12);
  // Differences 1, 2, 3 (by hand): mean 2, sd 1, t = 2 sqrt(3), dof 2, whose two-sided p is
  // 1 - |t| / sqrt(2 + t^2) = 1 - sqrt(6/7) = 0.0741799...
  const auto h = paired_t_test({3, 5, 7}, {2, 3, 4});
  EXPECT_NEAR(h.t, 2 * std::sqrt(3.0), 1e-12);
  EXPECT_NEAR(h.p_two_sided, 1 - std::sqrt(6.0 / 7.0), 1e-12);
  EXPECT_NEAR(h.p_two_sided, 0.0741799, 1e-7);
  // Two pairs: dof 1, p = 1 - 2 atan(|t|) / pi.
  const auto q = paired_t_test({2.0, 2.5}, {2.2, 2.6});
  EXPECT_NEAR(q.p_two_sided, 1 - 2 * std::atan(std::fabs(q.t)) / M_PI, 1e-12);
  EXPECT_TRUE(std::isnan(paired_t_test({1.0}, {2.0}).p_two_sided));
  EXPECT_TRUE(std::isnan(paired_t_test({1.0, 2.0}, {0.0, 1.0}).p_two_sided));  // equal differences
  EXPECT_THROW(paired_t_test({1.0, 2.0}, {1.0}), svattn::InvalidArgument);
  EXPECT_THROW(paired_t_test({}, {}), svattn::InvalidArgument);
}

}  // namespace
