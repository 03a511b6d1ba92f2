// Wall-clock time of svattn: the monotonic stopwatch behind every timing (core diagnostics, layers,
// LMs, CLI, benchmarks, tests) and the UTC time stamps written into reports. Header-only.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>

namespace svattn::support {

using MonotonicClock = std::chrono::steady_clock;

/// Monotonic wall-clock stopwatch, started on construction.
class Stopwatch {
 public:
  Stopwatch() : start_(MonotonicClock::now()) {}
  /// Seconds since construction or the last restart().
  double seconds() const {
    return std::chrono::duration<double>(MonotonicClock::now() - start_).count();
  }
  /// Milliseconds since construction or the last restart().
  double milliseconds() const { return 1e3 * seconds(); }
  void restart() { start_ = MonotonicClock::now(); }
  /// Seconds since the start, then restarts (one lap).
  double lap() {
    const auto now = MonotonicClock::now();
    const double s = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    return s;
  }

 private:
  MonotonicClock::time_point start_;
};

/// Seconds on the monotonic clock since an unspecified epoch (differences only).
inline double monotonic_seconds() {
  return std::chrono::duration<double>(MonotonicClock::now().time_since_epoch()).count();
}

/// Nanoseconds on the monotonic clock since an unspecified epoch (unique-name stamps, differences).
inline std::int64_t monotonic_nanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             MonotonicClock::now().time_since_epoch())
      .count();
}

/// UTC time stamp "2025-01-31T12:00:00Z" of `t`.
inline std::string utc_stamp(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// UTC time stamp "2025-01-31T12:00:00Z" of now.
inline std::string utc_now() { return utc_stamp(std::time(nullptr)); }

/// UTC time stamp with milliseconds, "2025-01-31T12:00:00.123Z", of `now`.
inline std::string utc_stamp_ms(std::chrono::system_clock::time_point now) {
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms.count()));
  return buf;
}

/// UTC time stamp with milliseconds of now.
inline std::string utc_now_ms() { return utc_stamp_ms(std::chrono::system_clock::now()); }

}  // namespace svattn::support
