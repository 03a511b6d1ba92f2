// The clock (support/clock.h): the stopwatch is monotonic and the UTC stamps have their format.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <thread>

#include "support/clock.h"

namespace {

using namespace svattn::support;

TEST(SupportClock, StopwatchMeasuresAndRestarts) {
  Stopwatch w;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double s = w.seconds();
  EXPECT_GE(s, 0.015);
  EXPECT_LT(s, 5.0);
  EXPECT_NEAR(w.milliseconds(), 1e3 * w.seconds(), 50.0);
  const double lap = w.lap();
  EXPECT_GE(lap, s);
  EXPECT_LT(w.seconds(), lap);
  w.restart();
  EXPECT_LT(w.seconds(), 1.0);
}

TEST(SupportClock, MonotonicReadingsNeverGoBack) {
  const double a = monotonic_seconds();
  const auto na = monotonic_nanoseconds();
  const double b = monotonic_seconds();
  const auto nb = monotonic_nanoseconds();
  EXPECT_LE(a, b);
  EXPECT_LE(na, nb);
}

TEST(SupportClock, UtcStampsHaveTheirFormat) {
  EXPECT_EQ(utc_stamp(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(utc_stamp(1738324800), "2025-01-31T12:00:00Z");
  EXPECT_TRUE(std::regex_match(utc_now(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  const auto t = std::chrono::system_clock::from_time_t(1738324800) + std::chrono::milliseconds(7);
  EXPECT_EQ(utc_stamp_ms(t), "2025-01-31T12:00:00.007Z");
  EXPECT_TRUE(
      std::regex_match(utc_now_ms(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
}

}  // namespace
