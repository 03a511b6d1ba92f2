// The benchmarks' shared timing and reporting helpers: a monotonic now(), timing a callable, the
// median and percentiles of samples, and the ratio rows of the tables (docs/performance.md). Every
// benchmark uses these; the implementations are the support layer's (src/support).
#pragma once
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "support/clock.h"
#include "support/statistics.h"

namespace svattn::bench {

using support::median;
using support::percentile;
using support::Stopwatch;

/// Seconds on the monotonic clock (differences only).
inline double now() { return support::monotonic_seconds(); }

/// Wall time of f().
inline double time_once(const std::function<void()>& f) {
  const Stopwatch watch;
  f();
  return watch.seconds();
}

/// Median wall time of `reps` runs of f().
inline double median_time(int reps, const std::function<void()>& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) t.push_back(time_once(f));
  return median(t);
}

/// A Markdown row "| label | median x | min x | max x |" of the paired ratios `r`.
inline void print_ratio_row(const std::string& label, const std::vector<double>& r) {
  const support::Spread s = support::spread(r);
  std::printf("| %s | %.2fx | %.2fx | %.2fx |\n", label.c_str(), s.median, s.min, s.max);
}

}  // namespace svattn::bench
