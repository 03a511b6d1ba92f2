// The vector (AVX) and scalar forms of the fixed four-lane sums give the same bits, alone, in the
// row forms, and for whole memories (a state built with the vector kernels hashes like
// one built with the forced scalar path; so does one built without the reuse of earlier rows).
#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <set>

#include "core/canonical.h"
#include "core/fixed_sum.h"
#include "streams.h"
#include "support/random_libstdcxx.h"
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
  svattn::support::Rng rng(3);
  svattn::support::libstdcxx::Normal normal;
  auto N = [&normal](svattn::support::Rng& r) { return normal(r); };
  auto E = [](svattn::support::Rng& r) {
    return static_cast<int>(svattn::support::libstdcxx::uniform_int(r, -30, 30));
  };
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

// The row forms (up to kRowBlock sums side by side, AVX) give each sum the scalar lanes' bits.
TEST(FixedSum, RowFormsEqualScalarLanesBitForBit) {
  if (!detail::vector_sums_available()) GTEST_SKIP() << "no AVX on this CPU";
  svattn::support::Rng rng(5);
  svattn::support::libstdcxx::Normal normal;
  auto N = [&normal](svattn::support::Rng& r) { return normal(r); };
  auto E = [](svattn::support::Rng& r) {
    return static_cast<int>(svattn::support::libstdcxx::uniform_int(r, -30, 30));
  };
  for (std::size_t n = 0; n <= 300; n += (n < 20 ? 1 : 7)) {
    std::vector<double> rows[detail::kRowBlock], b(n);
    std::vector<int> idx(n);
    for (std::size_t k = 0; k < n; ++k) {
      b[k] = std::ldexp(N(rng), E(rng));
      idx[k] = static_cast<int>((k * 11 + 5) % n);
    }
    const double* ptr[detail::kRowBlock];
    for (int t = 0; t < detail::kRowBlock; ++t) {
      rows[t].resize(n);
      for (double& v : rows[t]) v = std::ldexp(N(rng), E(rng));
      ptr[t] = rows[t].data();
    }
    for (int count = 1; count <= detail::kRowBlock; ++count) {
      double dv[detail::kRowBlock], gv[detail::kRowBlock];
      detail::dot_fixed_rows_avx(ptr, count, b.data(), n, dv);
      detail::gather_dot_fixed_rows_avx(ptr, count, idx.data(), b.data(), n, gv);
      for (int t = 0; t < count; ++t) {
        EXPECT_TRUE(same_bits(dv[t], detail::dot_fixed_scalar(ptr[t], b.data(), n)))
            << "dot rows, n = " << n << ", count = " << count << ", row " << t;
        EXPECT_TRUE(
            same_bits(gv[t], detail::gather_dot_fixed_scalar(ptr[t], idx.data(), b.data(), n)))
            << "gather rows, n = " << n << ", count = " << count << ", row " << t;
      }
    }
  }
}

TEST(FixedSum, SwitchForcesTheScalarPath) {
  if (!detail::vector_sums_available()) GTEST_SKIP() << "no AVX on this CPU";
  VectorSumsGuard guard;
  EXPECT_FALSE(detail::set_vector_sums(false) && detail::g_vector_sums);
  EXPECT_FALSE(detail::g_vector_sums);
  detail::set_vector_sums(true);
  EXPECT_TRUE(detail::g_vector_sums);
}

// The kernel configurations a memory can run with: the scalar lanes, the single-sum vector code,
// the vector row forms, and the row forms without the reuse of earlier rows' first entries.
struct KernelMode {
  const char* name;
  bool vector, row_blocks, reuse;
};
constexpr KernelMode kModes[] = {{"scalar lanes", false, true, true},
                                 {"vector, one sum at a time", true, false, true},
                                 {"vector row forms", true, true, true},
                                 {"vector row forms, no row reuse", true, true, false}};

// Restores the kernel switches when a test ends.
struct KernelModeGuard {
  bool vector = detail::g_vector_sums, blocks = detail::g_row_blocks,
       reuse = detail::g_reuse_row_prefixes;
  ~KernelModeGuard() {
    detail::set_vector_sums(vector);
    detail::g_row_blocks = blocks;
    detail::g_reuse_row_prefixes = reuse;
  }
};

// >= 20 random problems: streams, sizes, dimensions and C vary; each memory is built by adds and
// removes under every kernel mode. The hashes (and the batch solves under each) must agree, and
// the row-form counters prove which path ran: the vector modes never reach the scalar row forms,
// the scalar mode never the vector ones, and the reuse mode took over entries of earlier rows.
TEST(FixedSum, MemoriesBuiltWithAndWithoutVectorSumsHashIdentically) {
  if (!detail::vector_sums_available()) GTEST_SKIP() << "no AVX on this CPU";
  KernelModeGuard guard;
  using svattn::testing::Stream;
  const Stream streams[] = {Stream::kGaussian, Stream::kClustered, Stream::kNearDuplicate,
                            Stream::kDuplicate, Stream::kHeavyTailed};
  constexpr int kNumModes = static_cast<int>(std::size(kModes));
  svattn::support::Rng rng(17);
  std::uint64_t reused_total = 0;
  for (int problem = 0; problem < 24; ++problem) {
    const Stream s = streams[problem % 5];
    const int n = 80 + static_cast<int>(rng.next() % 150);
    const int d = 3 + static_cast<int>(rng.next() % 40);  // tails of every length mod 4
    const double C = (2.0 + static_cast<double>(rng.next() % 60) / 10.0) / n;
    const RowMatrix x = svattn::testing::make_keys(s, n, d, 1000 + problem);
    std::vector<TokenId> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    svattn::support::libstdcxx::shuffle(order.begin(), order.end(), rng);
    std::string hash[kNumModes], batch[kNumModes];
    for (int mode = 0; mode < kNumModes; ++mode) {
      const KernelMode& km = kModes[mode];
      detail::set_vector_sums(km.vector);
      detail::g_row_blocks = km.row_blocks;
      detail::g_reuse_row_prefixes = km.reuse;
      const detail::RowKernelCounts before = detail::row_kernel_counts();
      const std::uint64_t reused_before = detail::reused_row_entries();
      MemorySettings ms;
      ms.problem.C = C;
      ms.problem.kernel.bandwidth = std::sqrt(static_cast<double>(d));
      Memory m(ms, d, d);
      for (int i = 0; i < n; ++i)
        m.add(order[i], x.row(order[i]).transpose(), x.row(order[i]).transpose());
      for (int k = 0; k < n / 5; ++k) m.remove(order[k * 3 % n]);
      hash[mode] = m.state_sha256();
      BatchSettings bs;
      bs.problem = ms.problem;
      batch[mode] = solve_batch(m.tokens(), bs).state.state_sha256;
      const detail::RowKernelCounts after = detail::row_kernel_counts();
      const std::uint64_t vec = after.vector - before.vector, sca = after.scalar - before.scalar;
      if (!km.vector) {
        EXPECT_EQ(vec, 0u) << km.name;
        EXPECT_GT(sca, 0u) << km.name;
      } else {
        EXPECT_EQ(sca, 0u) << km.name;
        if (km.row_blocks)
          EXPECT_GT(vec, 0u) << km.name;
        else
          EXPECT_EQ(vec, 0u) << km.name;
      }
      const std::uint64_t reused = detail::reused_row_entries() - reused_before;
      if (km.reuse) reused_total += reused;
      if (!km.reuse) EXPECT_EQ(reused, 0u) << km.name;
    }
    for (int mode = 1; mode < kNumModes; ++mode) {
      EXPECT_EQ(hash[0], hash[mode])
          << "problem " << problem << " (" << svattn::testing::stream_name(s) << ", n = " << n
          << ", d = " << d << "), " << kModes[mode].name;
      EXPECT_EQ(batch[0], batch[mode]) << "problem " << problem << ", " << kModes[mode].name;
    }
    EXPECT_EQ(hash[0], batch[0]) << "problem " << problem;
  }
  // The removals left rows whose first entries were taken over (the reuse was exercised).
  EXPECT_GT(reused_total, 0u);
}
