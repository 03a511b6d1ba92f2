// The libstdc++ transforms over the one generator (support/random_libstdcxx.h): the bits recorded
// with GCC 12's std:: distributions, and the core tests' key streams built on them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "core/streams.h"
#include "support/bits.h"
#include "support/random_libstdcxx.h"

namespace {

namespace lib = svattn::support::libstdcxx;
using svattn::support::Rng;
using svattn::support_test::bits_of;
using svattn::support_test::fingerprint;

TEST(SupportRandomLibstdcxx, DistributionsKeepTheirRecordedBits) {
  Rng r(3);
  lib::Normal normal;
  std::vector<double> n;
  for (int i = 0; i < 1001; ++i) n.push_back(normal(r));
  EXPECT_EQ(bits_of(n[0]), 0xbff5bbcb62cf00feULL);
  EXPECT_EQ(fingerprint(n), 0xdd28bcaa6a203b22ULL);
  Rng u(3), c(3), e(3), g(3);
  std::vector<double> uv, cv;
  std::vector<int> ev, gv;
  for (int i = 0; i < 1000; ++i) {
    uv.push_back(lib::uniform(u));
    cv.push_back(lib::cauchy(c));
    ev.push_back(static_cast<int>(lib::uniform_int(e, -30, 30)));
    gv.push_back(static_cast<int>(lib::uniform_int(g, 0, i)));
  }
  EXPECT_EQ(fingerprint(uv), 0xf0b6acf359fd3939ULL);
  EXPECT_EQ(fingerprint(cv), 0x51c4969842d32a3fULL);
  EXPECT_EQ(fingerprint(ev), 0xdd999420ca0fdb9dULL);
  EXPECT_EQ(fingerprint(gv), 0xa4c9a9c6d17b25e1ULL);
}

TEST(SupportRandomLibstdcxx, ShuffleKeepsItsRecordedBits) {
  const struct {
    int n;
    std::uint64_t perm, next;
  } kCases[] = {{0, 0xcbf29ce484222325ULL, 0xc919b156ac5932c7ULL},
                {1, 0x4d25767f9dce13f5ULL, 0xc919b156ac5932c7ULL},
                {2, 0x08cd4c29d1e47d34ULL, 0x742e2fa6aa0a3bccULL},
                {3, 0xf26292e3dcb93c46ULL, 0x742e2fa6aa0a3bccULL},
                {10, 0x2d47f3789ab25204ULL, 0x0e6f56dd885da7feULL},
                {300, 0x4f2de5517a8a2ab9ULL, 0x7674f90a6ca2b2d8ULL},
                {1001, 0xab5bdc0a969a7858ULL, 0x5718d4de25515465ULL}};
  for (const auto& c : kCases) {
    Rng r(4);
    std::vector<int> v(c.n);
    std::iota(v.begin(), v.end(), 0);
    lib::shuffle(v.begin(), v.end(), r);
    EXPECT_EQ(fingerprint(v), c.perm) << c.n;
    EXPECT_EQ(r.next(), c.next) << c.n;  // the same number of draws
  }
}

#ifdef __GLIBCXX__
// Where the standard library is libstdc++, the written-out transforms equal it over many seeds.
TEST(SupportRandomLibstdcxx, EqualsTheStandardLibrary) {
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    std::mt19937_64 g(seed);
    Rng r(seed);
    std::normal_distribution<double> sn(0.0, 1.0);
    lib::Normal ln;
    std::uniform_int_distribution<int> si(-30, 30);
    for (int i = 0; i < 101; ++i) {
      EXPECT_EQ(bits_of(sn(g)), bits_of(ln(r)));
      EXPECT_EQ(si(g), lib::uniform_int(r, -30, 30));
    }
    std::vector<int> a(257), b(257);
    std::iota(a.begin(), a.end(), 0);
    b = a;
    std::shuffle(a.begin(), a.end(), g);
    lib::shuffle(b.begin(), b.end(), r);
    EXPECT_EQ(a, b);
    EXPECT_EQ(g(), r.next());
  }
}
#endif

TEST(SupportRandomLibstdcxx, CoreTestStreamsKeepTheirRecordedBits) {
  using svattn::testing::Stream;
  const struct {
    Stream s;
    std::uint64_t fp;
  } kCases[] = {{Stream::kGaussian, 0x09b785af7e9165c1ULL},
                {Stream::kClustered, 0xce1eefd8a51a430bULL},
                {Stream::kNearDuplicate, 0x8c68030d1dacb7e4ULL},
                {Stream::kDuplicate, 0xfc85a80a282fb9faULL},
                {Stream::kHeavyTailed, 0xf4056a9d76eb09a6ULL}};
  for (const auto& c : kCases) {
    const int k = static_cast<int>(c.s);
    const svattn::RowMatrix x = svattn::testing::make_keys(c.s, 200, 6, 1000 + k);
    EXPECT_EQ(svattn::support_test::fnv1a(x.data(), sizeof(double) * x.size()), c.fp)
        << svattn::testing::stream_name(c.s);
  }
}

}  // namespace
