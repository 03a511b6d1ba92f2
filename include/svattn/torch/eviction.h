// Baselines of the eviction and forgetting experiments (docs/layers.md §4): H2O heavy-hitter
// scoring and coefficient decay. Plain functions on tensors.
#pragma once
#include <torch/torch.h>

#include <cstdint>

namespace svattn::layers {

/// Accumulated attention each key receives: softmax(q k' / sqrt(d)) summed over the queries.
/// q [..., M, d], k [..., N, d] -> [..., N]. causal: query m sees keys 0..m + (N - M) (the last M
/// keys are the queries' own positions: H2O's streaming score). Not causal: every query sees every
/// key -- with the real future queries this is the "oracle" H2O score.
torch::Tensor h2o_scores(const torch::Tensor& q, const torch::Tensor& k, bool causal);

/// Keep mask [..., N] of H2O: the `recent` most recent tokens plus the `budget` highest-scoring
/// older ones (ties broken towards the lower index). budget, recent >= 0.
torch::Tensor h2o_keep_mask(const torch::Tensor& scores, std::int64_t budget, std::int64_t recent);

/// Coefficient-decay deletion (the forgetting baseline, no re-solve): alpha_i *= factor for the
/// deleted tokens (factor 0 = zeroing), then the whole vector is renormalised to sum 1.
/// alpha [..., N] >= 0, deleted bool [..., N], factor in [0, 1).
torch::Tensor coefficient_decay(const torch::Tensor& alpha, const torch::Tensor& deleted,
                                double factor);

}  // namespace svattn::layers
