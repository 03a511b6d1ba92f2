// Wall-clock helpers shared by the experiments, the CLI and the benchmarks: a monotonic stopwatch
// and the UTC time stamp written into reports. Header-only.
#pragma once
#include <chrono>
#include <ctime>
#include <string>

namespace svattn {

/// Monotonic wall-clock stopwatch (std::chrono::steady_clock), started on construction.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void restart() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

/// UTC time stamp "2025-01-31T12:00:00Z" of now.
inline std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace svattn
