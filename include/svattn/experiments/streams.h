// Deterministic random numbers and the synthetic key streams of the experiments (E1, E2).
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "svattn/kernel.h"

namespace svattn::experiments {

/// std::mt19937_64 (specified bit for bit) with hand-written transforms, so a seed gives the same
/// stream on every standard library.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller, one value per call).
  double normal();
  /// Uniform integer in [0, n) (rejection sampling, unbiased); 0 when n <= 1.
  std::uint64_t below(std::uint64_t n);
  std::uint64_t next() { return gen_(); }

 private:
  std::mt19937_64 gen_;
};

/// A seed for sub-task `k` of a run seeded with `seed` (splitmix64 of both).
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t k);

/// Fisher-Yates shuffle with Rng::below.
template <typename T>
void shuffle_in_place(std::vector<T>& v, Rng& rng) {
  for (std::size_t i = v.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng.below(i));
    std::swap(v[i - 1], v[j]);
  }
}

/// `k` distinct indices of [0, n), ascending.
std::vector<int> sample_without_replacement(int n, int k, Rng& rng);

/// n x d with i.i.d. N(0, scale^2) entries.
RowMatrix gaussian_keys(int n, int d, double scale, Rng& rng);
/// `clusters` centres ~ N(0, (4)^2 I), tokens = random centre + N(0, 0.3^2 I).
RowMatrix clustered_keys(int n, int d, int clusters, Rng& rng);
/// Near-duplicate stream: every odd token is a twin of a random earlier token, displaced by a
/// Gaussian direction of norm-scale eps ~ 10^U(-9, -6); even tokens are N(0, I).
RowMatrix near_duplicate_keys(int n, int d, Rng& rng);

/// Median Euclidean distance between `pairs` random pairs of distinct rows (the "median heuristic"
/// for the RBF bandwidth). Deterministic for a given rng state; 1.0 when all distances are 0.
double median_pairwise_distance(const RowMatrix& x, int pairs, Rng& rng);

}  // namespace svattn::experiments
