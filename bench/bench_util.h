// The benchmarks' shared timing and reporting helpers: a monotonic now(), timing a callable, the
// median and percentiles of samples, the ratio rows of the tables (docs/performance.md), and the
// "--name value" command lines of the store benchmarks. Every benchmark uses these; the timing and
// statistics are the support layer's (src/support).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
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

/// Reads a "--name value ..." command line: `set(name, value)` stores each pair and returns false
/// for a name it does not know. `--help` / `-h` prints `usage` and exits 0; an unknown name, a name
/// without a value, or a value that std::sto* cannot read (std::invalid_argument/out_of_range
/// thrown by `set`) prints one line naming it and exits 2.
inline void parse_options(int argc, char** argv, const char* program, const char* usage,
                          const std::function<bool(const std::string&, const std::string&)>& set) {
  for (int i = 1; i < argc; i += 2) {
    const std::string name = argv[i];
    if (name == "--help" || name == "-h") {
      std::printf("usage: %s\n", usage);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", program, name.c_str());
      std::exit(2);
    }
    const std::string value = argv[i + 1];
    bool known = false;
    try {
      known = set(name, value);
    } catch (const std::logic_error&) {
      std::fprintf(stderr, "%s: %s: cannot read '%s'\n", program, name.c_str(), value.c_str());
      std::exit(2);
    }
    if (!known) {
      std::fprintf(stderr, "%s: unknown option %s (--help lists them)\n", program, name.c_str());
      std::exit(2);
    }
  }
}

}  // namespace svattn::bench
