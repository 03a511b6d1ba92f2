// The transforms of GCC 12's libstdc++ distributions (generate_canonical, normal, cauchy,
// uniform_int, shuffle) written out over the one generator, so that the test and benchmark streams
// first recorded with std:: distributions keep their exact bits on every standard library.
// New code uses the transforms of support/random.h instead. Header-only.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "support/random.h"

namespace svattn::support::libstdcxx {

/// std::generate_canonical<double, 53> over a 64-bit engine: one draw, x / 2^64, below 1.
inline double canonical(Rng& rng) {
  double r = static_cast<double>(rng.next()) / 0x1.0p64;
  if (r >= 1.0) r = std::nextafter(1.0, 0.0);
  return r;
}

/// std::uniform_real_distribution<double>(a, b).
inline double uniform(Rng& rng, double a = 0.0, double b = 1.0) {
  return canonical(rng) * (b - a) + a;
}

/// std::normal_distribution<double>(mean, stddev): Marsaglia's polar method, the second value of
/// each pair kept for the next call.
class Normal {
 public:
  explicit Normal(double mean = 0.0, double stddev = 1.0) : mean_(mean), stddev_(stddev) {}
  double operator()(Rng& rng) {
    double ret;
    if (saved_available_) {
      saved_available_ = false;
      ret = saved_;
    } else {
      double x, y, r2;
      do {
        x = 2.0 * canonical(rng) - 1.0;
        y = 2.0 * canonical(rng) - 1.0;
        r2 = x * x + y * y;
      } while (r2 > 1.0 || r2 == 0.0);
      const double mult = std::sqrt(-2 * std::log(r2) / r2);
      saved_ = x * mult;
      saved_available_ = true;
      ret = y * mult;
    }
    return ret * stddev_ + mean_;
  }

 private:
  double mean_, stddev_;
  double saved_ = 0;
  bool saved_available_ = false;
};

/// std::cauchy_distribution<double>(a, b).
inline double cauchy(Rng& rng, double a = 0.0, double b = 1.0) {
  double u;
  do u = canonical(rng);
  while (u == 0.5);
  const double pi = static_cast<double>(3.1415926535897932384626433832795029L);
  return a + b * std::tan(pi * u);
}

/// Lemire's nearly divisionless draw in [0, range) (range >= 1) with 128-bit products.
inline std::uint64_t below_nearly_divisionless(Rng& rng, std::uint64_t range) {
  unsigned __int128 product = static_cast<unsigned __int128>(rng.next()) * range;
  std::uint64_t low = static_cast<std::uint64_t>(product);
  if (low < range) {
    const std::uint64_t threshold = (0 - range) % range;
    while (low < threshold) {
      product = static_cast<unsigned __int128>(rng.next()) * range;
      low = static_cast<std::uint64_t>(product);
    }
  }
  return static_cast<std::uint64_t>(product >> 64);
}

/// std::uniform_int_distribution<T>(a, b) for a 64-bit integer type or narrower (a <= b).
inline std::int64_t uniform_int(Rng& rng, std::int64_t a, std::int64_t b) {
  const std::uint64_t urange = static_cast<std::uint64_t>(b) - static_cast<std::uint64_t>(a);
  const std::uint64_t ret =
      urange == ~std::uint64_t{0} ? rng.next() : below_nearly_divisionless(rng, urange + 1);
  return static_cast<std::int64_t>(ret + static_cast<std::uint64_t>(a));
}

/// std::shuffle(first, last, engine) over a random-access range: swap positions two at a time
/// from one draw while n^2 fits in 64 bits.
template <typename RandomIt>
void shuffle(RandomIt first, RandomIt last, Rng& rng) {
  if (first == last) return;
  const std::uint64_t n = static_cast<std::uint64_t>(last - first);
  if (~std::uint64_t{0} / n >= n) {
    RandomIt i = first + 1;
    if (n % 2 == 0) std::iter_swap(i++, first + below_nearly_divisionless(rng, 2));
    while (i != last) {
      const std::uint64_t b0 = static_cast<std::uint64_t>(i - first) + 1, b1 = b0 + 1;
      const std::uint64_t x = below_nearly_divisionless(rng, b0 * b1);
      std::iter_swap(i++, first + x / b1);
      std::iter_swap(i++, first + x % b1);
    }
    return;
  }
  for (RandomIt i = first + 1; i != last; ++i) {
    std::iter_swap(
        i, first + below_nearly_divisionless(rng, static_cast<std::uint64_t>(i - first) + 1));
  }
}

}  // namespace svattn::support::libstdcxx
