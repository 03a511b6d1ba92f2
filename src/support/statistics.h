// Order statistics of timing samples for the benchmarks and diagnostics: median, percentile, mean,
// and the min / median / max summary of a ratio. Header-only. (Mean with a t interval and the
// paired t-test of the experiments' reports live with the experiments.)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <vector>

namespace svattn::support {

/// Median (the mean of the two middle values for an even count); NaN when empty.
inline double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

/// The q-quantile by the nearest-rank rule: the ceil(q n)-th smallest value (q in [0, 1]; q = 0
/// gives the minimum); NaN when empty.
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(q * static_cast<double>(v.size()));
  const std::size_t k = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return v[std::min(k, v.size() - 1)];
}

/// Arithmetic mean (left-to-right sum); NaN when empty.
inline double mean(const std::vector<double>& v) {
  if (v.empty()) return std::nan("");
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

/// Minimum, median and maximum of a sample (NaN when empty).
struct Spread {
  double min = std::nan("");
  double median = std::nan("");
  double max = std::nan("");
};

inline Spread spread(const std::vector<double>& v) {
  if (v.empty()) return {};
  const auto mm = std::minmax_element(v.begin(), v.end());
  return {*mm.first, median(v), *mm.second};
}

/// The element-wise ratios a[i] / b[i] over the common length.
inline std::vector<double> ratios(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) r.push_back(a[i] / b[i]);
  return r;
}

}  // namespace svattn::support
