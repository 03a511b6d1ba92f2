// Synthetic key streams of the experiments (experiments/streams.h).
#include "experiments/streams.h"

#include <algorithm>
#include <cmath>

namespace svattn::experiments {

std::vector<int> sample_without_replacement(int n, int k, Rng& rng) {
  std::vector<int> idx(static_cast<std::size_t>(std::max(n, 0)));
  for (int i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = i;
  k = std::clamp(k, 0, n);
  // Partial Fisher-Yates: the first k positions.
  for (int i = 0; i < k; ++i) {
    const int j = i + static_cast<int>(rng.below(static_cast<std::uint64_t>(n - i)));
    std::swap(idx[static_cast<std::size_t>(i)], idx[static_cast<std::size_t>(j)]);
  }
  idx.resize(static_cast<std::size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

RowMatrix gaussian_keys(int n, int d, double scale, Rng& rng) {
  RowMatrix x(n, d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) x(i, j) = scale * rng.normal();
  return x;
}

RowMatrix clustered_keys(int n, int d, int clusters, Rng& rng) {
  RowMatrix c = gaussian_keys(clusters, d, 4.0, rng);
  RowMatrix x(n, d);
  for (int i = 0; i < n; ++i) {
    const int which = static_cast<int>(rng.below(static_cast<std::uint64_t>(clusters)));
    for (int j = 0; j < d; ++j) x(i, j) = c(which, j) + 0.3 * rng.normal();
  }
  return x;
}

RowMatrix near_duplicate_keys(int n, int d, Rng& rng) {
  RowMatrix x(n, d);
  for (int i = 0; i < n; ++i) {
    if (i % 2 == 1) {
      const int src = static_cast<int>(rng.below(static_cast<std::uint64_t>(i)));
      const double eps = std::pow(10.0, -9.0 + 3.0 * rng.uniform());
      for (int j = 0; j < d; ++j) x(i, j) = x(src, j) + eps * rng.normal();
    } else {
      for (int j = 0; j < d; ++j) x(i, j) = rng.normal();
    }
  }
  return x;
}

double median_pairwise_distance(const RowMatrix& x, int pairs, Rng& rng) {
  const int n = static_cast<int>(x.rows());
  if (n < 2) return 1.0;
  std::vector<double> d;
  d.reserve(static_cast<std::size_t>(pairs));
  for (int p = 0; p < pairs; ++p) {
    const int i = static_cast<int>(rng.below(static_cast<std::uint64_t>(n)));
    int j = static_cast<int>(rng.below(static_cast<std::uint64_t>(n - 1)));
    if (j >= i) ++j;
    d.push_back((x.row(i) - x.row(j)).norm());
  }
  std::sort(d.begin(), d.end());
  const double m = d[d.size() / 2];
  return m > 0 ? m : 1.0;
}

}  // namespace svattn::experiments
