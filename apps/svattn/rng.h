// Deterministic random numbers on every platform, header-only (shared by the CLI, the tests and the
// benchmarks): std::mt19937_64 is specified bit for bit, and the transforms below are written out
// because std distributions are implementation-defined.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>

#include "svattn/kernel.h"

namespace svattn::cli {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller, one value per call).
  double normal() {
    const double u1 = 1.0 - uniform();  // in (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  /// Uniform integer in [0, n) (rejection sampling, unbiased).
  std::uint64_t below(std::uint64_t n) {
    if (n <= 1) return 0;
    const std::uint64_t limit = (~std::uint64_t{0} / n) * n;
    while (true) {
      const std::uint64_t v = gen_();
      if (v < limit) return v % n;
    }
  }
  std::mt19937_64& engine() { return gen_; }

 private:
  std::mt19937_64 gen_;
};

/// n x d standard-normal matrix, filled row by row.
inline RowMatrix gaussian_matrix(int n, int d, Rng& rng) {
  RowMatrix m(n, d);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) m(i, j) = rng.normal();
  }
  return m;
}

/// Fisher-Yates shuffle with Rng::below (deterministic across standard libraries).
template <typename T>
void shuffle(T& v, Rng& rng) {
  for (std::size_t i = v.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng.below(i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace svattn::cli
