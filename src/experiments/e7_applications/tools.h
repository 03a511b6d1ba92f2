// E7 — applications (docs/experiments.md "E7", docs/paper.md "Limits"): surgical fact forgetting,
// exact knowledge editing and patient erasure from the audited store, with a membership-inference
// probe and the approximate removal baselines. The building blocks are exposed here for tests and
// for other drivers; the experiment itself is run() (e7_applications.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "svattn/types.h"

namespace svattn::experiments::e7_applications {

// ------------------------------------------------------------------------------ fact encoding

/// Deterministic codes of symbols ("subject:17", "relation:2", "object:301"): each symbol's code is
/// a Gaussian vector N(0, I/dim) drawn from an Rng seeded with (seed, FNV-1a of the name), so a
/// symbol has the same code in every run, independent of which other symbols exist.
///   key(s, r)  = (code("subject:s", key_dim) + code("relation:r", key_dim)) / sqrt(2)
///   value(o)   = code("object:o", value_dim)
/// Facts sharing a subject have correlated keys (squared distance ~1 instead of ~2).
class FactCodebook {
 public:
  FactCodebook(int key_dim, int value_dim, std::uint64_t seed);
  int key_dim() const { return key_dim_; }
  int value_dim() const { return value_dim_; }
  Eigen::VectorXd symbol(const std::string& name, int dim) const;
  Eigen::VectorXd key(int subject, int relation) const;
  Eigen::VectorXd value(int object) const;

 private:
  int key_dim_;
  int value_dim_;
  std::uint64_t seed_;
};

/// Index of the row of `codes` with the largest cosine similarity to `readout` (a readout is a
/// convex mixture of value codes, so it shrinks towards the origin: a Euclidean decoder would
/// favour the code of smallest norm); ties to the lower index; -1 when the readout is not finite or
/// zero, or `codes` is empty.
int decode_object(const RowMatrix& codes, const Eigen::Ref<const Eigen::VectorXd>& readout);

// ------------------------------------------------------------------------------ membership probe

/// Area under the ROC curve of scores `pos` (positives) against `neg`: the Mann-Whitney statistic
/// P(pos > neg) + P(pos == neg) / 2, computed by sorting (ties share their mid-rank). NaN when
/// either side is empty.
double auc(const std::vector<double>& pos, const std::vector<double>& neg);

/// AUC with a 95 % percentile interval from a cluster bootstrap: each of `reps` replicates
/// resamples the groups (e.g. patients; each inner vector holds one group's scores) of each side
/// with replacement and recomputes the AUC over all scores of the drawn groups. `auc` is the point
/// estimate on all scores. Deterministic for a seed.
struct AucInterval {
  double auc = 0;
  double lo = 0;
  double hi = 0;
  int reps = 0;
  bool covers(double x) const { return lo <= x && x <= hi; }
};
AucInterval auc_cluster_bootstrap(const std::vector<std::vector<double>>& pos,
                                  const std::vector<std::vector<double>>& neg, int reps,
                                  std::uint64_t seed);

// ------------------------------------------------------------------------------ approximate removal

/// Euclidean projection of y onto the capped simplex {sum a = 1, 0 <= a_i <= C} (requires
/// n C >= 1): a_i = clip(y_i - tau, 0, C) with tau found by bisection to machine precision.
Eigen::VectorXd project_capped_simplex(const Eigen::VectorXd& y, double C);

/// `steps` projected-gradient steps on F(a) = a'(K + mu I)a - diag(K)'a over the capped simplex,
/// step 1/L with L = 2 (max_i sum_j |K_ij| + mu) (Gershgorin bound of the Hessian), from `start`.
Eigen::VectorXd projected_gradient_steps(const Eigen::MatrixXd& K, double ridge, double C,
                                         Eigen::VectorXd start, int steps);

/// The multiplier b that best satisfies g = 0 on the margin of `alpha` (0 < a_i < C): the mean of
/// K_ii/2 - ((K + mu I) a)_i over those i; `fallback` when there is none.
double refit_offset(const Eigen::MatrixXd& K, double ridge, double C, const Eigen::VectorXd& alpha,
                    double fallback);

// ------------------------------------------------------------------------------ byte scan

/// Little-endian IEEE fp64 bytes of a row of doubles (the layout of the store's key blobs).
std::vector<std::uint8_t> fp64_bytes(const double* v, int n);

/// Scans whole files for byte patterns. A missing file counts as empty.
struct ByteScan {
  std::size_t bytes_scanned = 0;
  std::size_t patterns = 0;
  std::size_t patterns_found = 0;         ///< patterns occurring at least once in some file
  std::vector<std::string> files_with_hits;
};
ByteScan scan_files(const std::vector<std::string>& files,
                    const std::vector<std::vector<std::uint8_t>>& patterns);

/// The files of an SQLite store: the database, its -wal, -journal and -shm.
std::vector<std::string> store_files(const std::string& db_path);

}  // namespace svattn::experiments::e7_applications
