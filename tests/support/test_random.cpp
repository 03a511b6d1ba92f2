// The one generator (support/random.h): its streams for fixed seeds equal the bits recorded
// before the support layer existed, so every result computed from them stays.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "support/bits.h"
#include "support/random.h"
#include "support/random_matrix.h"

namespace {

using svattn::support::derive_seed;
using svattn::support::Rng;
using svattn::support_test::bits_of;
using svattn::support_test::fingerprint;

template <typename F>
std::vector<double> draw(std::uint64_t seed, int n, F f) {
  Rng rng(seed);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(f(rng));
  return v;
}

TEST(SupportRandom, UniformAndNormalKeepTheirRecordedBits) {
  const auto u = draw(42, 1000, [](Rng& r) { return r.uniform(); });
  EXPECT_EQ(bits_of(u[0]), 0x3fe82a3befaddcbcULL);
  EXPECT_EQ(fingerprint(u), 0xe3377f133735dbefULL);
  const auto z = draw(42, 1000, [](Rng& r) { return r.normal(); });
  EXPECT_EQ(bits_of(z[0]), 0xbff13c1b5ffc24acULL);
  EXPECT_EQ(fingerprint(z), 0x28aca8edafde5b54ULL);
}

TEST(SupportRandom, IntegersSeedsAndShuffleKeepTheirRecordedBits) {
  Rng r(42);
  EXPECT_EQ(r.next(), 0xc151df7d6ee5e2d6ULL);
  Rng b(42);
  std::vector<std::uint64_t> below;
  for (int i = 0; i < 1000; ++i) below.push_back(b.below(1 + i));
  EXPECT_EQ(fingerprint(below), 0x6f28854af85802ecULL);
  Rng w(42);
  std::vector<std::int64_t> between;
  for (int i = 0; i < 1000; ++i) between.push_back(w.between(-i, 3 * i));
  EXPECT_EQ(fingerprint(between), 0x069286d5740270d3ULL);
  std::vector<std::uint64_t> seeds;
  for (int k = 0; k < 100; ++k) seeds.push_back(derive_seed(42, k));
  EXPECT_EQ(seeds[0], 0xbdd732262feb6e95ULL);
  EXPECT_EQ(fingerprint(seeds), 0x063877102e18fc39ULL);
  Rng s(9);
  std::vector<int> perm(100);
  std::iota(perm.begin(), perm.end(), 0);
  svattn::support::shuffle_in_place(perm, s);
  EXPECT_EQ(fingerprint(perm), 0x9356ddcb278fe615ULL);
}

TEST(SupportRandom, StoreBenchmarkTransformsKeepTheirRecordedBits) {
  // Box-Muller with u1 at the cell midpoints, and uniform in [-1, 1) (the store's test keys).
  EXPECT_EQ(fingerprint(draw(42, 1000, [](Rng& r) { return r.normal_open(); })),
            0x5850948108913979ULL);
  EXPECT_EQ(fingerprint(draw(11, 1000, [](Rng& r) { return r.uniform_signed(); })),
            0x8c7aea760bc1c50fULL);
}

TEST(SupportRandom, SplitmixAndHashBelow) {
  // derive_seed is splitmix64 one golden gamma per sub-task further.
  for (std::uint64_t k = 0; k < 5; ++k)
    EXPECT_EQ(derive_seed(42, k), svattn::support::splitmix64(42 + 0x9e3779b97f4a7c15ULL * k));
  EXPECT_EQ(svattn::support::splitmix64(0), 0xe220a8397b1dcdafULL);  // the reference first output
  EXPECT_EQ(svattn::support::hash_below(0, 10), 0u);
  EXPECT_EQ(svattn::support::hash_below(~std::uint64_t{0}, 10), 9u);
  EXPECT_EQ(svattn::support::hash_below(std::uint64_t{1} << 63, 10), 5u);
}

TEST(SupportRandom, RangesHold) {
  Rng r(7);
  for (int i = 0; i < 10000; ++i) {
    const double u = r.uniform(), o = r.uniform_open(), s = r.uniform_signed();
    EXPECT_TRUE(u >= 0 && u < 1);
    EXPECT_TRUE(o > 0 && o < 1);
    EXPECT_TRUE(s >= -1 && s < 1);
    EXPECT_LT(r.below(7), 7u);
    const std::int64_t v = r.between(-3, 3);
    EXPECT_TRUE(v >= -3 && v <= 3);
  }
  EXPECT_EQ(r.below(0), 0u);
  EXPECT_EQ(r.below(1), 0u);
}

TEST(SupportRandom, MatricesAreRowByRowDraws) {
  Rng a(5), b(5);
  const svattn::RowMatrix m = svattn::support::gaussian_matrix(3, 4, a);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(bits_of(m(i, j)), bits_of(b.normal()));
  Rng c(5), d(5);
  const svattn::RowMatrix o = svattn::support::gaussian_matrix_open(2, 3, c);
  const svattn::RowMatrix s = svattn::support::uniform_signed_matrix(2, 3, c);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(bits_of(o(i, j)), bits_of(d.normal_open()));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(bits_of(s(i, j)), bits_of(d.uniform_signed()));
}

}  // namespace
