// Evaluation of the character LMs: bits per byte of a model over the fixed windows of a split, and
// the keys one attention head's memory sees.
#pragma once
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "svattn/lm/corpus.h"
#include "svattn/torch/model.h"

namespace svattn::lm {

struct EvalOptions {
  Split split = Split::kTest;
  std::int64_t seq = 0;             ///< window length (>= 2; the checkpoint's training seq in `eval`)
  std::int64_t windows = 0;         ///< 0: every window of the split
  std::int64_t batch = 16;          ///< windows per forward (fixed: results do not depend on it
                                    ///< across runs, but a different value may change rounding)
};

struct EvalResult {
  double bpc = 0;                   ///< bits per byte = mean NLL / ln 2
  double nll = 0;                   ///< mean NLL (nats / byte)
  std::int64_t targets = 0;
  std::int64_t windows = 0;
  std::int64_t seq = 0;
  double seconds = 0;
  std::vector<layers::AttentionDiagnostics> diagnostics;  ///< averaged support / gate per layer
};

/// Mean next-byte NLL of `model` over the fixed windows of a split (no gradient, eval mode).
EvalResult evaluate(layers::CharLm& model, const Corpus& corpus, const EvalOptions& options);

/// Keys (and values) of one head of a layer's attention as its memory sees them: k_proj of the
/// layer's normalised input, L2-normalised when the hybrid normalises keys. tokens: int64 [T].
struct LayerKeys {
  torch::Tensor keys;    ///< fp64 [T, dh]
  torch::Tensor values;  ///< fp64 [T, dh]
  double bandwidth = std::nan("");  ///< hybrid: the head's RBF sigma
  double C = std::nan("");
  double mu = std::nan("");
  bool normalized = false;
};
LayerKeys learned_keys(layers::CharLm& model, const torch::Tensor& tokens, std::int64_t layer,
                       std::int64_t head);

}  // namespace svattn::lm
