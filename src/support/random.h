// The one deterministic random-number generator of svattn (library, CLI, experiments, tests,
// benchmarks): std::mt19937_64 is specified bit for bit by the standard, and every transform below
// is written out, because the std:: distributions (normal, uniform_int, shuffle, ...) are
// implementation-defined and would change results across standard libraries (docs/experiments.md
// "Reproducibility"). Header-only. The transforms that reproduce streams recorded with libstdc++'s
// distributions are in support/random_libstdcxx.h.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace svattn::support {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  /// Uniform in (0, 1): the midpoints of the 2^53 cells of uniform().
  double uniform_open() { return (static_cast<double>(gen_() >> 11) + 0.5) * 0x1.0p-53; }
  /// Uniform in [-1, 1) with 53 random bits (2 uniform() - 1, exactly).
  double uniform_signed() { return static_cast<double>(gen_() >> 11) * 0x1.0p-52 - 1.0; }
  /// Standard normal (Box-Muller, one value per call, u1 = 1 - uniform()).
  double normal() {
    const double u1 = 1.0 - uniform();  // in (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  /// Standard normal (Box-Muller, one value per call, u1 = uniform_open()): the store
  /// benchmarks' key stream.
  double normal_open() {
    const double u1 = uniform_open();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  /// Uniform integer in [0, n) (rejection sampling, unbiased); 0 when n <= 1.
  std::uint64_t below(std::uint64_t n) {
    if (n <= 1) return 0;
    const std::uint64_t limit = (~std::uint64_t{0} / n) * n;
    while (true) {
      const std::uint64_t v = gen_();
      if (v < limit) return v % n;
    }
  }
  /// Uniform integer in [lo, hi] (lo <= hi).
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(hi - lo) + 1));
  }
  /// The next raw 64-bit output.
  std::uint64_t next() { return gen_(); }
  /// The engine, for code that needs a UniformRandomBitGenerator (never with a std:: distribution
  /// where results must be reproducible).
  std::mt19937_64& engine() { return gen_; }

 private:
  std::mt19937_64 gen_;
};

/// SplitMix64 as a stateless, well-mixed 64-bit hash (Steele, Lea & Flood 2014): one step of the
/// generator from state `x`.
inline std::uint64_t splitmix64(std::uint64_t x) {
  std::uint64_t z = x + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// A seed for sub-task `k` of a run seeded with `seed`: splitmix64 of seed + k * golden gamma.
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t k) {
  return splitmix64(seed + 0x9e3779b97f4a7c15ULL * k);
}

/// A well-mixed 64-bit hash `h` mapped to [0, n) by Lemire's multiply-shift (no modulo; the bias
/// is below n / 2^64).
inline std::uint64_t hash_below(std::uint64_t h, std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(h) * n) >> 64);
}

/// Fisher-Yates shuffle with Rng::below (the same order on every standard library).
template <typename T>
void shuffle_in_place(T& v, Rng& rng) {
  for (std::size_t i = v.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng.below(i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace svattn::support
