// The vector (AVX) and scalar forms of the fixed four-lane sums give the same bits, alone and for
// whole memories (issue 15: a state built with the vector kernels hashes like one built with the
// forced scalar path).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "core/fixed_sum.h"
#include "streams.h"
#include "svattn/batch_solver.h"
#include "svattn/memory.h"

using namespace svattn;

namespace {

bool same_bits(double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; }

// Restores the process-wide setting when a test ends.
struct VectorSumsGuard {
  bool prev = detail::g_vector_sums;
  ~VectorSumsGuard() { detail::set_vector_sums(prev); }
};

}  // namespace

TEST(FixedSum, VectorLanesEqualScalarLanesBitForBit) {
  if (!detail::vector_sums_available()) GTEST_SKIP() << "no AVX on this CPU";
  std::mt19937_64 rng(3);
  std::normal_distribution<double> N(0.0, 1.0);
  std::uniform_int_distribution<int> E(-30, 30);
  int differ_from_naive = 0;
  for (std::size_t n = 0; n <= 300; ++n) {
    std::vector<double> a(n), b(n);
    std::vector<int> idx(n);
    for (std::size_t k = 0; k < n; ++k) {
      a[k] = std::ldexp(N(rng), E(rng));  // mixed magnitudes: rounding matters
      b[k] = std::ldexp(N(rng), E(rng));
      idx[k] = static_cast<int>((k * 7 + 3) % n);
    }
    EXPECT_TRUE(same_bits(detail::dot_fixed_avx(a.data(), b.data(), n),
                          detail::dot_fixed_scalar(a.data(), b.data(), n)))
        << "dot, n = " << n;
    EXPECT_TRUE(same_bits(detail::sq_dist_fixed_avx(a.data(), b.data(), n),
                          detail::sq_dist_fixed_scalar(a.data(), b.data(), n)))
        << "sq_dist, n = " << n;
    EXPECT_TRUE(same_bits(detail::gather_dot_fixed_avx(a.data(), idx.data(), b.data(), n),
                          detail::gather_dot_fixed_scalar(a.data(), idx.data(), b.data(), n)))
        << "gather, n = " << n;
    double naive = 0;
    for (std::size_t k = 0; k < n; ++k) naive += a[k] * b[k];
    differ_from_naive += !same_bits(naive, detail::dot_fixed_scalar(a.data(), b.data(), n));
  }
  // The inputs are hard enough that another summation order gives other bits.
  EXPECT_GT(differ_from_naive, 100);
}

TEST(FixedSum, SwitchForcesTheScalarPath) {
  if (!detail::vector_sums_available()) GTEST_SKIP() << "no AVX on this CPU";
  VectorSumsGuard guard;
  EXPECT_FALSE(detail::set_vector_sums(false) && detail::g_vector_sums);
  EXPECT_FALSE(detail::g_vector_sums);
  detail::set_vector_sums(true);
  EXPECT_TRUE(detail::g_vector_sums);
}

// >= 20 random problems: streams, sizes, dimensions and C vary; each memory is built by adds and
// removes, once with the vector sums and once with the forced scalar path. The two hashes (and the
// batch solves under each) must agree.
TEST(FixedSum, MemoriesBuiltWithAndWithoutVectorSumsHashIdentically) {
  if (!detail::vector_sums_available()) GTEST_SKIP() << "no AVX on this CPU";
  VectorSumsGuard guard;
  using svattn::testing::Stream;
  const Stream streams[] = {Stream::kGaussian, Stream::kClustered, Stream::kNearDuplicate,
                            Stream::kDuplicate, Stream::kHeavyTailed};
  std::mt19937_64 rng(17);
  for (int problem = 0; problem < 24; ++problem) {
    const Stream s = streams[problem % 5];
    const int n = 80 + static_cast<int>(rng() % 150);
    const int d = 3 + static_cast<int>(rng() % 40);  // tails of every length mod 4
    const double C = (2.0 + static_cast<double>(rng() % 60) / 10.0) / n;
    const RowMatrix x = svattn::testing::make_keys(s, n, d, 1000 + problem);
    std::vector<TokenId> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::string hash[2], batch[2];
    for (int vec = 0; vec < 2; ++vec) {
      detail::set_vector_sums(vec == 1);
      MemorySettings ms;
      ms.problem.C = C;
      ms.problem.kernel.bandwidth = std::sqrt(static_cast<double>(d));
      Memory m(ms, d, d);
      for (int i = 0; i < n; ++i)
        m.add(order[i], x.row(order[i]).transpose(), x.row(order[i]).transpose());
      for (int k = 0; k < n / 5; ++k) m.remove(order[k * 3 % n]);
      hash[vec] = m.state_sha256();
      BatchSettings bs;
      bs.problem = ms.problem;
      batch[vec] = solve_batch(m.tokens(), bs).state.state_sha256;
    }
    EXPECT_EQ(hash[0], hash[1]) << "problem " << problem << " (" << svattn::testing::stream_name(s)
                                << ", n = " << n << ", d = " << d << ")";
    EXPECT_EQ(batch[0], batch[1]) << "problem " << problem;
    EXPECT_EQ(hash[0], batch[0]) << "problem " << problem;
  }
}
