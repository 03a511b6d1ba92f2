#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "streams.h"
#include "support/random_libstdcxx.h"
#include "svattn/batch_solver.h"
#include "svattn/errors.h"

using namespace svattn;
using svattn::testing::make_keys;
using svattn::testing::Stream;

namespace {
BatchSettings rbf(double C, double sigma, double ridge = 1e-6) {
  BatchSettings s;
  s.problem.C = C;
  s.problem.kernel.bandwidth = sigma;
  s.problem.ridge = ridge;
  return s;
}
TokenSet rows(std::initializer_list<std::initializer_list<double>> r) {
  RowMatrix x(static_cast<int>(r.size()), static_cast<int>(r.begin()->size()));
  int i = 0;
  for (auto& row : r) {
    int j = 0;
    for (double v : row) x(i, j++) = v;
    ++i;
  }
  return TokenSet::from_rows(x);
}
}  // namespace

TEST(BatchGolden, TwoPointsSplitEvenly) {
  const BatchResult r = solve_batch(rows({{0.0, 0.0}, {1.0, 1.0}}), rbf(1.0, 1.0, 0.0));
  EXPECT_EQ(r.state.status, Status::kOptimal);
  EXPECT_NEAR(r.state.alpha[0], 0.5, 1e-15);
  EXPECT_NEAR(r.state.alpha[1], 0.5, 1e-15);
  EXPECT_EQ(r.state.partition.margin, (std::vector<TokenId>{0, 1}));
  EXPECT_TRUE(r.state.partition.error.empty());  // C >= 1: E is empty
}

TEST(BatchGolden, EquilateralTriangle) {
  const double h = std::sqrt(3.0) / 2;
  const BatchResult r = solve_batch(rows({{0, 0}, {1, 0}, {0.5, h}}), rbf(0.9, 1.3, 0.0));
  EXPECT_EQ(r.state.status, Status::kOptimal);
  for (double a : r.state.alpha) EXPECT_NEAR(a, 1.0 / 3, 1e-14);
}

TEST(BatchGolden, LinearKernelMinimalEnclosingInterval) {
  // Points 0, 1, 2 on a line, linear kernel: the ball is centred at 1 with radius 1; the middle
  // point is interior. a = (1/2, 0, 1/2), b = 0 exactly (g_i = (Ka)_i - x_i^2/2 + b).
  BatchSettings s;
  s.problem.kernel.type = KernelType::kLinear;
  s.problem.C = 1.0;
  s.problem.ridge = 0.0;
  const BatchResult r = solve_batch(rows({{0.0}, {1.0}, {2.0}}), s);
  EXPECT_EQ(r.state.status, Status::kOptimal);
  EXPECT_DOUBLE_EQ(r.state.alpha[0], 0.5);
  EXPECT_EQ(r.state.alpha[1], 0.0);
  EXPECT_DOUBLE_EQ(r.state.alpha[2], 0.5);
  EXPECT_NEAR(r.state.b, 0.0, 1e-15);
  EXPECT_EQ(r.state.partition.reserve, (std::vector<TokenId>{1}));
}

TEST(BatchGolden, ExactlyOneOverCIsTheWarmupPoint) {
  // n*C = 1 exactly: the only feasible point is a_i = C = 1/n.
  const TokenSet t = TokenSet::from_rows(make_keys(Stream::kGaussian, 4, 3, 1));
  const BatchResult r = solve_batch(t, rbf(0.25, 1.0));
  EXPECT_EQ(r.state.status, Status::kWarmup);
  for (double a : r.state.alpha) EXPECT_EQ(a, 0.25);
  EXPECT_LE(r.state.kkt.max_violation, 1e-15);
}

TEST(BatchGolden, WarmupBelowOneOverC) {
  const TokenSet t = TokenSet::from_rows(make_keys(Stream::kGaussian, 3, 2, 2));
  const BatchResult r = solve_batch(t, rbf(0.1, 1.0));
  EXPECT_EQ(r.state.status, Status::kWarmup);
  EXPECT_TRUE(r.state.warmup);
  for (double a : r.state.alpha) EXPECT_EQ(a, 1.0 / 3);
  // Every token is at its (raised) bound; b makes the farthest token sit on the sphere.
  EXPECT_EQ(r.state.partition.error.size(), 3u);
}

TEST(BatchGolden, SingleToken) {
  const TokenSet t = TokenSet::from_rows(make_keys(Stream::kGaussian, 1, 4, 3));
  for (double C : {0.5, 1.0, 2.0}) {
    const BatchResult r = solve_batch(t, rbf(C, 1.0));
    EXPECT_EQ(r.state.alpha[0], 1.0) << "C=" << C;
    EXPECT_LE(r.state.kkt.max_violation, 1e-15);
  }
}

TEST(BatchGolden, EmptyTokenSet) {
  TokenSet t;
  t.keys.resize(0, 2);
  t.values.resize(0, 2);
  const BatchResult r = solve_batch(t, rbf(0.1, 1.0));
  EXPECT_EQ(r.state.status, Status::kEmpty);
}

TEST(Batch, KktResidualsOnRandomProblems) {
  int k = 0;
  for (Stream s : {Stream::kGaussian, Stream::kClustered, Stream::kHeavyTailed}) {
    for (int n : {20, 150, 400}) {
      for (double Cn : {1.5, 4.0, 20.0}) {  // C = Cn / n, from just above 1/n
        const double C = Cn / n;
        const TokenSet t = TokenSet::from_rows(make_keys(s, n, 5, 100 + k++));
        const BatchResult r = solve_batch(t, rbf(C, 2.0));
        ASSERT_EQ(r.state.status, Status::kOptimal) << stream_name(s) << " n=" << n << " C=" << C;
        EXPECT_LE(r.state.kkt.max_violation, 1e-10);
        EXPECT_LE(r.state.kkt.sum_error, 1e-12);
        EXPECT_EQ(r.state.kkt.box_violation, 0.0);
        double sum = 0;
        for (double a : r.state.alpha) sum += a;
        EXPECT_NEAR(sum, 1.0, 1e-12);
      }
    }
  }
}

TEST(Batch, PolyAndLinearKernelsExerciseTheDiagonalTerm) {
  for (KernelType type : {KernelType::kLinear, KernelType::kPoly}) {
    BatchSettings s;
    s.problem.kernel.type = type;
    s.problem.kernel.degree = 2;
    s.problem.C = 0.05;
    const TokenSet t = TokenSet::from_rows(make_keys(Stream::kGaussian, 200, 3, 9));
    const BatchResult r = solve_batch(t, s);
    EXPECT_EQ(r.state.status, Status::kOptimal) << to_string(type);
    double scale = 1;
    for (int i = 0; i < t.size(); ++i)
      scale = std::max(scale, kernel(s.problem.kernel, t.keys.row(i).data(), t.keys.row(i).data(), 3));
    EXPECT_LE(r.state.kkt.max_violation, 1e-10 * scale) << to_string(type);
  }
}

TEST(Batch, DeterministicAndRowOrderInvariant) {
  const RowMatrix x = make_keys(Stream::kClustered, 300, 6, 11);
  TokenSet t = TokenSet::from_rows(x);
  const BatchResult a = solve_batch(t, rbf(0.02, 1.5));
  const BatchResult b = solve_batch(t, rbf(0.02, 1.5));
  EXPECT_EQ(a.state.state_sha256, b.state.state_sha256);
  // Shuffle the rows but keep each key's id: the same state, bit for bit.
  std::vector<int> perm(300);
  std::iota(perm.begin(), perm.end(), 0);
  svattn::support::Rng rng(4);
  svattn::support::libstdcxx::shuffle(perm.begin(), perm.end(), rng);
  TokenSet s;
  s.keys.resize(300, 6);
  s.values.resize(300, 6);
  for (int r = 0; r < 300; ++r) {
    s.ids.push_back(perm[r]);
    s.keys.row(r) = x.row(perm[r]);
    s.values.row(r) = x.row(perm[r]);
  }
  const BatchResult c = solve_batch(s, rbf(0.02, 1.5));
  EXPECT_EQ(c.state.state_sha256, a.state.state_sha256);
  EXPECT_EQ(c.state.alpha, a.state.alpha);
}

TEST(Batch, DuplicatesWithRidgeHaveOneAnswer) {
  const RowMatrix x = make_keys(Stream::kDuplicate, 240, 3, 21);
  const TokenSet t = TokenSet::from_rows(x);
  const BatchResult r = solve_batch(t, rbf(0.02, 1.0, 1e-6));
  ASSERT_EQ(r.state.status, Status::kOptimal);
  // Exact duplicates get equal coefficients (the strictly convex problem is symmetric in them), up
  // to the rounding of a margin system whose condition number is about lambda_max(K_SS) / ridge
  // (duplicate rows make K_SS singular but for the ridge 1e-6), so equal only to ~1e-7 relative.
  for (int i = 0; i < 240; ++i)
    for (int j = 0; j < i; ++j)
      if (x.row(i) == x.row(j)) EXPECT_NEAR(r.state.alpha[i], r.state.alpha[j], 1e-6 * r.state.alpha[i]);
  // And the answer does not depend on the row order.
  TokenSet rev;
  rev.keys = x.colwise().reverse();
  rev.values = rev.keys;
  for (int i = 0; i < 240; ++i) rev.ids.push_back(239 - i);
  EXPECT_EQ(solve_batch(rev, rbf(0.02, 1.0, 1e-6)).state.state_sha256, r.state.state_sha256);
}

TEST(Batch, NearDuplicatesWithRidge) {
  const TokenSet t = TokenSet::from_rows(make_keys(Stream::kNearDuplicate, 300, 4, 31));
  const BatchResult r = solve_batch(t, rbf(0.02, 1.0, 1e-6));
  EXPECT_EQ(r.state.status, Status::kOptimal);
  EXPECT_LE(r.state.kkt.max_violation, 1e-10);
}

TEST(Batch, SettingsValidateNameTheField) {
  auto expect_field = [](BatchSettings s, const std::string& field) {
    try {
      s.validate();
      FAIL() << "expected InvalidArgument for " << field;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  BatchSettings s;
  s.problem.C = 0;
  expect_field(s, "C");
  s = BatchSettings{};
  s.problem.C = -1;
  expect_field(s, "C");
  s = BatchSettings{};
  s.problem.ridge = -1e-3;
  expect_field(s, "ridge");
  s = BatchSettings{};
  s.problem.kernel.bandwidth = -2;
  expect_field(s, "bandwidth");
  s = BatchSettings{};
  s.smo_tol = 0;
  expect_field(s, "smo_tol");
  s = BatchSettings{};
  s.tolerances.alpha_tol = 1;
  expect_field(s, "alpha_tol");
}

TEST(Batch, BadTokensAreRejected) {
  RowMatrix x(3, 2);
  x << 0, 1, 2, std::nan(""), 3, 4;
  EXPECT_THROW(solve_batch(TokenSet::from_rows(x), BatchSettings{}), FormatError);
  TokenSet dup = TokenSet::from_rows(make_keys(Stream::kGaussian, 3, 2, 1));
  dup.ids[2] = 0;
  EXPECT_THROW(solve_batch(dup, BatchSettings{}), InvalidArgument);
}

TEST(Batch, IterationCapIsAStatusNotAnException) {
  BatchSettings s = rbf(0.01, 1.0);
  s.max_smo_iterations = 1;
  s.tolerances.max_refine_iterations = 1;
  const TokenSet t = TokenSet::from_rows(make_keys(Stream::kGaussian, 500, 8, 5));
  const BatchResult r = solve_batch(t, s);
  EXPECT_EQ(r.diagnostics.smo_iterations, 1);
  EXPECT_NE(r.state.status, Status::kOptimal);
}
