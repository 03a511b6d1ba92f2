// LIBSVM's one-class SVM as an external oracle of the batch solver (docs/math.md §9). For the RBF
// kernel
// the problems coincide with nu = 1/(n C), gamma = 1/sigma^2: LIBSVM's alpha scaled by 1/(nu n) = C
// is ours, and its rho maps to our multiplier by b = 1/2 - rho C (K_ii = 1). LIBSVM caches kernel
// values in float, so coefficients are compared to 1e-5 and the partition exactly.
#include <gtest/gtest.h>
#include <svm.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/random_matrix.h"
#include "svattn/batch_solver.h"
#include "svattn/readout.h"

namespace svattn {
namespace {

void quiet(const char*) {}

struct LibsvmResult {
  std::vector<double> alpha;  ///< scaled to our problem (LIBSVM alpha * C), per row
  double rho = 0;
  std::vector<double> decision;  ///< LIBSVM decision value per row (sum a_L k - rho)
  int iterations_warning = 0;
};

/// Trains LIBSVM's one-class SVM on the rows of x (dense nodes, indices 1..d).
LibsvmResult run_libsvm(const RowMatrix& x, double sigma, double C) {
  svm_set_print_string_function(&quiet);
  const int n = static_cast<int>(x.rows());
  const int d = static_cast<int>(x.cols());
  std::vector<svm_node> nodes(static_cast<std::size_t>(n) * (d + 1));
  std::vector<svm_node*> rows(n);
  std::vector<double> y(n, 1.0);
  for (int i = 0; i < n; ++i) {
    svm_node* r = &nodes[static_cast<std::size_t>(i) * (d + 1)];
    for (int j = 0; j < d; ++j) r[j] = svm_node{j + 1, x(i, j)};
    r[d] = svm_node{-1, 0.0};
    rows[i] = r;
  }
  svm_problem prob{n, y.data(), rows.data()};
  svm_parameter param{};
  param.svm_type = ONE_CLASS;
  param.kernel_type = RBF;
  param.gamma = 1.0 / (sigma * sigma);
  param.nu = 1.0 / (n * C);
  param.eps = 1e-12;
  param.cache_size = 64;
  param.shrinking = 0;
  param.probability = 0;
  param.C = 1;
  if (const char* err = svm_check_parameter(&prob, &param)) {
    ADD_FAILURE() << "LIBSVM rejected the parameters: " << err;
    return {};
  }
  svm_model* model = svm_train(&prob, &param);
  LibsvmResult out;
  out.alpha.assign(n, 0.0);
  for (int k = 0; k < model->l; ++k) {
    out.alpha[model->sv_indices[k] - 1] = model->sv_coef[0][k] * C;
  }
  out.rho = model->rho[0];
  out.decision.resize(n);
  for (int i = 0; i < n; ++i) {
    double dec = 0;
    svm_predict_values(model, rows[i], &dec);
    out.decision[i] = dec;
  }
  svm_free_and_destroy_model(&model);
  return out;
}

enum class Kind { kGaussian, kClusters, kHeavyTail };

RowMatrix make_keys(Kind kind, int n, int d, support::Rng& rng) {
  RowMatrix x = support::gaussian_matrix(n, d, rng);
  if (kind == Kind::kClusters) {
    RowMatrix centers = support::gaussian_matrix(3, d, rng) * 3.0;
    for (int i = 0; i < n; ++i) x.row(i) = 0.5 * x.row(i) + centers.row(i % 3);
  } else if (kind == Kind::kHeavyTail) {
    for (int i = 0; i < n; ++i) {
      // Student-t-like radial scaling: a few far outliers.
      const double u = 1.0 - rng.uniform();
      x.row(i) *= std::min(20.0, 1.0 / std::sqrt(u));
    }
  }
  return x;
}

struct Problem {
  int index = 0;
  Kind kind = Kind::kGaussian;
  int n = 0;
  int d = 0;
  double sigma = 1;
  double C = 0.1;
};

std::string describe(const Problem& p) {
  std::ostringstream os;
  os << "problem " << p.index << " (kind " << static_cast<int>(p.kind) << ", n " << p.n << ", d "
     << p.d << ", sigma " << p.sigma << ", C " << p.C << ", nC " << p.n * p.C << ")";
  return os.str();
}

char set_of(double a, double C, double tol) {
  if (a <= tol) return 'R';
  if (a >= C - tol) return 'E';
  return 'S';
}

TEST(LibsvmOracle, RandomRbfProblemsAgree) {
  constexpr int kProblems = 60;
  const int dims[3] = {2, 5, 16};
  support::Rng rng(0x5eed0001);
  int compared = 0;
  int partition_mismatches = 0;
  double worst_dalpha = 0;
  double worst_db = 0;
  long support_total = 0;
  for (int p = 0; p < kProblems; ++p) {
    Problem pr;
    pr.index = p;
    pr.kind = static_cast<Kind>(p % 3);
    pr.d = dims[(p / 3) % 3];
    pr.n = 50 + static_cast<int>(rng.below(251));
    // Bandwidth relative to the typical distance sqrt(2 d); C log-uniform in [1.02/n, 0.5].
    pr.sigma = std::sqrt(2.0 * pr.d) * (0.3 + 1.2 * rng.uniform());
    const double lo = std::log(1.02 / pr.n);
    const double hi = std::log(0.5);
    pr.C = std::exp(lo + (hi - lo) * rng.uniform());
    const RowMatrix x = make_keys(pr.kind, pr.n, pr.d, rng);
    SCOPED_TRACE(describe(pr));

    BatchSettings bs;
    bs.problem.kernel.type = KernelType::kRbf;
    bs.problem.kernel.bandwidth = pr.sigma;
    bs.problem.C = pr.C;
    bs.problem.ridge = 0;
    const TokenSet tokens = TokenSet::from_rows(x);
    const BatchResult ours = solve_batch(tokens, bs);
    ASSERT_EQ(ours.state.status, Status::kOptimal) << to_string(ours.state.status);
    ASSERT_EQ(ours.state.ids.size(), static_cast<std::size_t>(pr.n));

    const LibsvmResult ref = run_libsvm(x, pr.sigma, pr.C);
    ASSERT_EQ(ref.alpha.size(), static_cast<std::size_t>(pr.n));
    ++compared;

    // Coefficients.
    double dalpha = 0;
    for (int i = 0; i < pr.n; ++i)
      dalpha = std::max(dalpha, std::abs(ours.state.alpha[i] - ref.alpha[i]));
    worst_dalpha = std::max(worst_dalpha, dalpha);
    EXPECT_LE(dalpha, 1e-5);

    // Partition: LIBSVM's alpha classified with a tolerance of 1e-6 C.
    const double tol = 1e-6 * pr.C;
    std::string mismatch;
    auto in = [](const std::vector<TokenId>& v, int i) {
      return std::binary_search(v.begin(), v.end(), static_cast<TokenId>(i));
    };
    for (int i = 0; i < pr.n; ++i) {
      const char ours_set = in(ours.state.partition.margin, i)  ? 'S'
                            : in(ours.state.partition.error, i) ? 'E'
                                                                : 'R';
      const char ref_set = set_of(ref.alpha[i], pr.C, tol);
      if (ours_set != ref_set) {
        std::ostringstream os;
        os << " token " << i << ": ours " << ours_set << " a=" << ours.state.alpha[i] << ", libsvm "
           << ref_set << " a=" << ref.alpha[i] << ";";
        mismatch += os.str();
      }
    }
    if (!mismatch.empty()) ++partition_mismatches;
    EXPECT_TRUE(mismatch.empty()) << "partition differs:" << mismatch;
    support_total +=
        static_cast<long>(ours.state.partition.margin.size() + ours.state.partition.error.size());

    // Multiplier: b = 1/2 - rho C.
    const double db = std::abs(ours.state.b - (0.5 - ref.rho * pr.C));
    worst_db = std::max(worst_db, db);
    EXPECT_LE(db, 1e-5);

    // Decision-function signs on the training points, away from the boundary.
    const Support sup = support_of(ours.state, tokens);
    int sign_mismatches = 0;
    for (int i = 0; i < pr.n; ++i) {
      const double f =
          decision_function(bs.problem.kernel, sup, ours.state.b, x.row(i).transpose());
      const double f_ref = ref.decision[i] * pr.C;  // same scale as ours
      EXPECT_NEAR(f, f_ref, 1e-5) << "token " << i;
      if (std::abs(f) > 1e-5 && (f > 0) != (f_ref > 0)) ++sign_mismatches;
    }
    EXPECT_EQ(sign_mismatches, 0);
  }
  EXPECT_GE(compared, 50);
  std::printf(
      "[libsvm oracle] %d problems, %d partition mismatches, worst |da| %.3e, worst |db| "
      "%.3e, mean |S u E| %.1f\n",
      compared, partition_mismatches, worst_dalpha, worst_db,
      compared ? static_cast<double>(support_total) / compared : 0.0);
}

/// Duplicate and near-duplicate keys with a ridge: the optimum is unique, so the row order of the
/// input cannot matter. Same ids in another row order: the same bits. Ids reassigned (a shuffled
/// file): the same coefficient per key up to rounding, duplicates sharing their coefficient.
/// "Up to rounding" is bounded by the conditioning of the margin system: a duplicate pair makes
/// K_SS + mu I nearly singular, cond ~ |S| / mu ~ 1e8 here, so fp64 solves in a different token
/// order agree to ~1e-16 * cond = 1e-8 at worst (observed: ~1e-10). The tolerance is 1e-9.
TEST(LibsvmOracle, DuplicatesWithRidgeGiveOneAnswer) {
  constexpr double kRoundingTol = 1e-9;
  support::Rng rng(0x5eed0002);
  double worst_renumbered = 0;
  double worst_duplicate = 0;
  for (int rep = 0; rep < 6; ++rep) {
    const int base = 60;
    const int d = rep % 2 == 0 ? 2 : 8;
    RowMatrix b = support::gaussian_matrix(base, d, rng);
    // Each base point appears with an exact duplicate and a near duplicate (1e-9 .. 1e-6 apart).
    RowMatrix x(3 * base, d);
    for (int i = 0; i < base; ++i) {
      x.row(3 * i) = b.row(i);
      x.row(3 * i + 1) = b.row(i);
      const double eps = std::pow(10.0, -9.0 + 3.0 * rng.uniform());
      x.row(3 * i + 2) = b.row(i);
      x(3 * i + 2, static_cast<int>(rng.below(d))) += eps;
    }
    BatchSettings bs;
    bs.problem.kernel.bandwidth = std::sqrt(2.0 * d) * 0.7;
    bs.problem.C = 2.0 / base;
    bs.problem.ridge = 1e-6;
    SCOPED_TRACE("rep " + std::to_string(rep));
    const TokenSet tokens = TokenSet::from_rows(x);
    const BatchResult ref = solve_batch(tokens, bs);
    ASSERT_EQ(ref.state.status, Status::kOptimal);

    // 1. Same ids, rows shuffled.
    std::vector<int> perm(x.rows());
    for (int i = 0; i < static_cast<int>(perm.size()); ++i) perm[i] = i;
    support::shuffle_in_place(perm, rng);
    TokenSet shuffled;
    shuffled.keys.resize(x.rows(), d);
    shuffled.values.resize(x.rows(), d);
    for (int r = 0; r < static_cast<int>(perm.size()); ++r) {
      shuffled.ids.push_back(perm[r]);
      shuffled.keys.row(r) = x.row(perm[r]);
      shuffled.values.row(r) = x.row(perm[r]);
    }
    const BatchResult same = solve_batch(shuffled, bs);
    EXPECT_EQ(same.state.state_sha256, ref.state.state_sha256);
    EXPECT_EQ(same.state.alpha, ref.state.alpha);

    // 2. A shuffled file: row r of the new file is old row perm[r] and gets id r.
    RowMatrix xs(x.rows(), d);
    for (int r = 0; r < static_cast<int>(perm.size()); ++r) xs.row(r) = x.row(perm[r]);
    const BatchResult renum = solve_batch(TokenSet::from_rows(xs), bs);
    ASSERT_EQ(renum.state.status, Status::kOptimal);
    double worst = 0;
    for (int r = 0; r < static_cast<int>(perm.size()); ++r) {
      worst = std::max(worst, std::abs(renum.state.alpha[r] - ref.state.alpha[perm[r]]));
    }
    EXPECT_LE(worst, kRoundingTol);
    worst_renumbered = std::max(worst_renumbered, worst);
    EXPECT_EQ(renum.state.partition.margin.size(), ref.state.partition.margin.size());
    EXPECT_EQ(renum.state.partition.error.size(), ref.state.partition.error.size());
    // Exact duplicates share their coefficient.
    for (int i = 0; i < base; ++i) {
      EXPECT_NEAR(ref.state.alpha[3 * i], ref.state.alpha[3 * i + 1], kRoundingTol) << "base " << i;
      worst_duplicate =
          std::max(worst_duplicate, std::abs(ref.state.alpha[3 * i] - ref.state.alpha[3 * i + 1]));
    }
  }
  std::printf(
      "[duplicates] worst |da| per key after renumbering %.3e, between exact duplicates %.3e\n",
      worst_renumbered, worst_duplicate);
}

}  // namespace
}  // namespace svattn
