// Problem settings, tolerances, tokens and the canonical state shared by every path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "svattn/kernel.h"

namespace svattn {

using TokenId = std::int64_t;

/// Defines the optimisation problem (docs/math.md §1). Everything here enters the state hash.
///   minimise F(a) = a'(K + ridge*I)a - diag(K)'a  s.t.  sum(a) = 1, 0 <= a_i <= C.
struct ProblemSettings {
  KernelSettings kernel;
  /// Box bound. Finite and > 0. Fixed for the life of a memory. When n*C <= 1 the memory is in
  /// warm-up (all a_i = 1/n, docs/math.md §1).
  double C = 0.1;
  /// Ridge mu >= 0 (finite). With mu > 0 the optimum is unique for any keys, duplicates included.
  /// Default 1e-6 (in units of K; RBF has K_ii = 1): smaller ridges were observed to break the
  /// termination of the path algorithm on near-duplicate keys (docs/math.md §1).
  double ridge = 1e-6;

  void validate() const;
  /// The one finite-kernel check every path runs on each key it accepts (memory adds, batch solve,
  /// verifier): throws InvalidArgument naming the kernel setting when kappa(x, x) + ridge is not a
  /// finite fp64 number (e.g. poly degree 1000, coef0 1e300, or a huge linear key). For the three
  /// kernels |kappa(a, b)| <= max(kappa(a, a), kappa(b, b)) (Cauchy-Schwarz, coef0 >= 0), so finite
  /// diagonals bound every kernel value (docs/math.md §1).
  void check_key(const double* key, int dim, TokenId id) const;
};

/// Numerical tolerances of the canonical refinement (docs/math.md §4). Not part of the hash.
struct Tolerances {
  /// A coefficient with a <= alpha_tol * min(C, 1) is reserve (exactly 0); with
  /// a >= C - alpha_tol * min(C, 1) it is error (exactly C). In (0, 1e-3).
  double alpha_tol = 1e-10;
  /// Rounding floor of gradient checks, relative to max(1, max_i K_ii). A reserve token is
  /// accepted when g >= -max(kkt_tol * scale, alpha_tol * min(C,1) * gamma_i) and an error token
  /// when g <= +max(...), where gamma_i is the token's Schur complement w.r.t. the margin system:
  /// i.e. when entering the margin set would move its coefficient by at most the alpha threshold.
  /// This makes the partition a function of the optimum, not of the path; the floor only absorbs
  /// round-off (near-duplicate twins have gamma ~ 2 ridge, so a larger floor would accept
  /// gradients that imply coefficients far above the threshold). In (0, 1e-2).
  double kkt_tol = 1e-15;
  /// Partition repairs allowed in one canonical refinement before it reports failure. >= 1.
  int max_refine_iterations = 64;

  void validate() const;
};

/// Outcome of a solve or of one memory operation. Numerical outcomes, never exceptions.
enum class Status {
  kOptimal,          ///< KKT verified within tolerance on every token
  kWarmup,           ///< n*C <= 1: the state is the warm-up point a_i = 1/n (docs/math.md §1)
  kEmpty,            ///< no tokens
  kIterationLimit,   ///< a solver hit its iteration cap; the state is the best found, KKT not met
  kKktViolated,      ///< refinement ended with KKT violated beyond tolerance
  kSingular,         ///< the margin system is singular (duplicates with ridge = 0): optimum not unique
};
std::string to_string(Status s);

/// The certificate of the paper: which tokens carry the readout. Ascending token ids.
struct Partition {
  std::vector<TokenId> margin;   ///< 0 < a < C, g = 0
  std::vector<TokenId> error;    ///< a = C, g <= 0
  std::vector<TokenId> reserve;  ///< a = 0, g >= 0
  bool operator==(const Partition& o) const {
    return margin == o.margin && error == o.error && reserve == o.reserve;
  }
  bool operator!=(const Partition& o) const { return !(*this == o); }
};

/// KKT residuals of a state. g_i = ((K + mu I) a)_i - K_ii/2 + b  (half the gradient of F plus the
/// multiplier b). margin: g = 0; error: g <= 0; reserve: g >= 0.
struct KktReport {
  double max_violation = 0;  ///< max over tokens of the sign/complementarity violation of g
  double sum_error = 0;      ///< |sum(a) - 1|
  double box_violation = 0;  ///< max(0, -a_i, a_i - C)
};

/// The canonical state: a function of (settings, token set) only. Ordered by ascending token id.
struct State {
  ProblemSettings settings;
  int dim = 0;        ///< key dimension
  int value_dim = 0;  ///< value dimension
  std::vector<TokenId> ids;      ///< ascending
  std::vector<double> alpha;     ///< aligned with ids
  double b = 0;
  Partition partition;
  KktReport kkt;
  Status status = Status::kEmpty;
  bool warmup = false;
  /// sha256 of the canonical byte layout (docs/math.md): settings, ids, keys, values, alpha, b.
  std::string state_sha256;
};

/// A set of tokens. Rows of keys/values align with ids. Ids must be unique.
struct TokenSet {
  std::vector<TokenId> ids;
  RowMatrix keys;    ///< n x d
  RowMatrix values;  ///< n x dv (dv may differ from d)

  int size() const { return static_cast<int>(ids.size()); }
  /// Checks shapes, finiteness and id uniqueness; throws InvalidArgument / FormatError.
  void validate() const;
  /// validate() plus ProblemSettings::check_key on every key.
  void validate(const ProblemSettings& problem) const;
  /// Tokens with rows [0, n) and ids 0..n-1; values default to the keys.
  static TokenSet from_rows(const RowMatrix& keys, const RowMatrix* values = nullptr);
  /// Subset with the given ids removed (order of the rest kept).
  TokenSet without(const std::vector<TokenId>& excluded) const;
};

}  // namespace svattn
