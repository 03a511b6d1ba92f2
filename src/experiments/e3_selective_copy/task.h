// E3's task and state accounting: the selective-copy batch generator (testable without LibTorch
// tensors) and the floats of state one head carries, by attention type (docs/experiments.md, E3).
#pragma once
#include <cstdint>
#include <vector>

#include "support/random.h"
#include "svattn/torch/attention.h"

namespace svattn::experiments::e3_selective_copy {

// The support layer's generator (src/support/random.h), by its short names.
using support::derive_seed;
using support::Rng;
using support::shuffle_in_place;

/// Vocabulary of the selective-copy task: token 0 = padding, 1 = go marker, 2 = output query,
/// 3 .. 3 + symbols - 1 = data symbols.
struct SelectiveCopyTask {
  int symbols = 8;       ///< data alphabet size (chance recall = 1 / symbols)
  int k = 4;             ///< data tokens per sequence
  int prefix = 64;       ///< length of the data + padding region (k data tokens among prefix - k pads)

  static constexpr int kPad = 0;
  static constexpr int kGo = 1;
  static constexpr int kQuery = 2;
  static constexpr int kFirstSymbol = 3;
  int vocab() const { return kFirstSymbol + symbols; }
  /// Sequence length of the model input: prefix, the go marker, k - 1 output queries.
  int length() const { return prefix + k; }
  /// Throws InvalidArgument for k < 1, symbols < 2, prefix < k.
  void validate() const;
};

/// One batch: input tokens [B, prefix + k] and targets [B, prefix + k] (-100 = ignored: every
/// position except the k outputs). The input is the prefix (k symbols drawn uniformly, at k
/// distinct positions drawn uniformly, padding elsewhere), then `go`, then k - 1 `query` tokens;
/// the target of the go position is the first data symbol, of query j the (j + 1)-th, in order of
/// position. Row-major int64 vectors, so the generator is testable without LibTorch.
struct SelectiveCopyBatch {
  int batch = 0;
  int length = 0;
  std::vector<std::int64_t> inputs;   ///< batch * length
  std::vector<std::int64_t> targets;  ///< batch * length
  std::vector<std::vector<int>> data_positions;  ///< per row: the k data positions, ascending
};
SelectiveCopyBatch make_selective_copy_batch(const SelectiveCopyTask& task, int batch, Rng& rng);

/// Floats of recurrent/attention state one head carries at inference when predicting a token
/// (docs/layers.md §3, docs/experiments.md "How state is matched"):
///   softmax window W:  W (d_k + d_v);  full softmax: `context` (d_k + d_v);
///   linear / DeltaNet: d_k d_v (+ d_k for linear attention's normaliser);
///   hybrid:            (chunk + average |S ∪ E|) (d_k + d_v) (+ |S ∪ E| for the coefficients α).
/// `average_support` is used by the hybrid only; `context` by full softmax only.
double state_floats_per_head(const layers::AttentionConfig& config, double average_support,
                             std::int64_t context);

}  // namespace svattn::experiments::e3_selective_copy
