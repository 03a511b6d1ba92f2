// The KKT check's kernel block (src/core/check_kernel.h): both ISA copies agree with the scalar
// kernel, and verify_state over several row blocks (threads, rows gathered out of order) accepts
// the optimum and rejects a moved one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "core/check_kernel.h"
#include "streams.h"
#include "support/random.h"
#include "svattn/batch_solver.h"
#include "svattn/certificate.h"
#include "svattn/kernel.h"

using namespace svattn;
using svattn::testing::make_keys;
using svattn::testing::Stream;

namespace {

// ka = K(X, XS) a and diag(K) with the library's scalar kernel().
void reference(const KernelSettings& k, const RowMatrix& X, const RowMatrix& XS,
               const Eigen::VectorXd& a, Eigen::VectorXd& ka, Eigen::VectorXd& kd) {
  const int d = static_cast<int>(X.cols());
  ka.setZero(X.rows());
  kd.resize(X.rows());
  for (Eigen::Index r = 0; r < X.rows(); ++r) {
    for (Eigen::Index c = 0; c < XS.rows(); ++c)
      ka[r] += kernel(k, X.row(r).data(), XS.row(c).data(), d) * a[c];
    kd[r] = kernel(k, X.row(r).data(), X.row(r).data(), d);
  }
}

using KernelCopy = void (*)(const detail::CheckKernelArgs&, double*, double*);

// The copies this CPU can run (a copy built for an ISA the CPU lacks would die of SIGILL: the
// AVX-512 one on an AVX2-only machine), and the run-time choice.
std::vector<KernelCopy> runnable_copies() {
  std::vector<KernelCopy> runs{detail::check_kernel_baseline::run};
  if (detail::check_kernel_avx2::cpu_has()) runs.push_back(detail::check_kernel_avx2::run);
  if (detail::check_kernel_avx512::cpu_has()) runs.push_back(detail::check_kernel_avx512::run);
  runs.push_back(detail::check_kernel_block);
  return runs;
}

}  // namespace

TEST(CheckKernel, BothCopiesMatchTheScalarKernel) {
  const std::vector<KernelCopy> copies = runnable_copies();
  if (copies.size() < 4) {
    std::printf("CheckKernel: this CPU runs %zu of the 3 ISA copies (no AVX-512 or no AVX2)\n",
                copies.size() - 1);
  }
  const RowMatrix X = make_keys(Stream::kGaussian, 37, 5, 3);
  const RowMatrix XS = make_keys(Stream::kGaussian, 13, 5, 4);
  Eigen::VectorXd a(13);
  for (int c = 0; c < 13; ++c) a[c] = 0.01 * (c + 1);
  const Eigen::VectorXd sq_s = XS.rowwise().squaredNorm();
  for (KernelType t : {KernelType::kRbf, KernelType::kLinear, KernelType::kPoly}) {
    KernelSettings k;
    k.type = t;
    k.bandwidth = 1.7;
    k.degree = 3;
    k.coef0 = 0.5;
    detail::CheckKernelArgs args;
    args.type = static_cast<int>(t);
    args.bandwidth = k.bandwidth;
    args.degree = k.degree;
    args.coef0 = k.coef0;
    args.x = X.data();
    args.m = 37;
    args.d = 5;
    args.xs = XS.data();
    args.sq_s = sq_s.data();
    args.a_s = a.data();
    args.s = 13;
    Eigen::VectorXd want, want_d;
    reference(k, X, XS, a, want, want_d);
    Eigen::VectorXd ka(37), kd(37);
    for (KernelCopy run : copies) {
      ka.setConstant(NAN);
      kd.setConstant(NAN);
      run(args, ka.data(), kd.data());
      for (int r = 0; r < 37; ++r) {
        EXPECT_NEAR(ka[r], want[r], 1e-12 * (1 + std::abs(want[r])))
            << to_string(t) << " row " << r;
        EXPECT_NEAR(kd[r], want_d[r], 1e-12 * (1 + std::abs(want_d[r]))) << to_string(t);
      }
    }
  }
}

TEST(CheckKernel, VerifyOverSeveralBlocksOfShuffledRows) {
  // 8,300 tokens: three row blocks (4,096 + 4,096 + 108), the token set's rows not in id order
  // (gathered path).
  TokenSet t = TokenSet::from_rows(make_keys(Stream::kGaussian, 8300, 3, 11));
  std::vector<int> perm(8300);
  std::iota(perm.begin(), perm.end(), 0);
  svattn::support::Rng rng(5);
  svattn::support::shuffle_in_place(perm, rng);
  TokenSet shuffled;
  shuffled.ids.resize(8300);
  shuffled.keys.resize(8300, 3);
  shuffled.values.resize(8300, 3);
  for (int r = 0; r < 8300; ++r) {
    shuffled.ids[r] = t.ids[perm[r]];
    shuffled.keys.row(r) = t.keys.row(perm[r]);
    shuffled.values.row(r) = t.values.row(perm[r]);
  }
  BatchSettings bs;
  bs.problem.C = 0.05;
  bs.problem.kernel.bandwidth = 2.0;
  const State s = solve_batch(t, bs).state;
  for (const TokenSet* ts : {&t, &shuffled}) {
    const VerifyReport r = verify_state(*ts, s, Tolerances{}, false);
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_LT(r.kkt.max_violation, 1e-9);
    State badb = s;
    badb.b += 1e-6;
    EXPECT_FALSE(verify_state(*ts, badb, Tolerances{}, false).kkt_ok);
  }
}
