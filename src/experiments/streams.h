// The synthetic key streams of the experiments (E1, E2, E7), drawn from support::Rng.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "svattn/kernel.h"
#include "support/random.h"

namespace svattn::experiments {

// The support layer's generator (src/support/random.h), by its short names.
using support::derive_seed;
using support::Rng;
using support::shuffle_in_place;

/// `k` distinct indices of [0, n), ascending.
std::vector<int> sample_without_replacement(int n, int k, Rng& rng);

/// n x d with i.i.d. N(0, scale^2) entries.
RowMatrix gaussian_keys(int n, int d, double scale, Rng& rng);
/// `clusters` centres ~ N(0, (4)^2 I), tokens = random centre + N(0, 0.3^2 I).
RowMatrix clustered_keys(int n, int d, int clusters, Rng& rng);
/// Near-duplicate stream: every odd token is a twin of a random earlier token, displaced by a
/// Gaussian direction of norm-scale eps ~ 10^U(-9, -6); even tokens are N(0, I).
RowMatrix near_duplicate_keys(int n, int d, Rng& rng);

/// Median Euclidean distance between `pairs` random pairs of distinct rows (the "median heuristic"
/// for the RBF bandwidth). Deterministic for a given rng state; 1.0 when all distances are 0.
double median_pairwise_distance(const RowMatrix& x, int pairs, Rng& rng);

}  // namespace svattn::experiments
