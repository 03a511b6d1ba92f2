// The order statistics of timing samples (support/statistics.h).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "support/statistics.h"

namespace {

using namespace svattn::support;

TEST(SupportStatistics, MedianOfOddEvenAndEmpty) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({5}), 5);
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

}  // namespace
