// Duplicate keys in the support of the hybrid's chunked SV memories: how many *distinct* key
// vectors |S ∪ E| holds, and whether exact duplicates carry one coefficient (docs/experiments.md,
// E3 "Distinct support keys"). Diagnostics only: no gradient, nothing here changes the forward.
#pragma once
#include <torch/torch.h>

#include <vector>

namespace svattn::layers {

struct DistinctSupport {
  /// Mean number of distinct key vectors (bitwise equal = one) in |S ∪ E| per head, over the batch
  /// and the memories of chunks >= 1.
  std::vector<double> distinct_per_head;
  /// Largest |alpha_i - alpha_first| over the support tokens of one memory whose key has the
  /// bytes of an earlier support token's (alpha_first: that earlier token's); 0 without duplicates.
  double duplicate_alpha_spread = 0;
  /// Support tokens (summed over memories) whose key equals an earlier support key of the same
  /// memory: what merging duplicates into one token with a multiplicity would save.
  long duplicate_support_tokens = 0;
};

/// keys [B, H, T, d] as given to the SV memory; role and alpha [B, H, nC, T] as in ExactInfo /
/// BatchedInfo (role != 0: in S ∪ E); chunk the chunk length L (memory c holds tokens < c·L).
/// Throws InvalidArgument for shapes that do not match.
DistinctSupport distinct_support(const torch::Tensor& keys, const torch::Tensor& role,
                                 const torch::Tensor& alpha, std::int64_t chunk);

}  // namespace svattn::layers
