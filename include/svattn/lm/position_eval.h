// Evaluation of a trained char LM by position: the test BPC split by the query's position within
// the hybrid's chunk (where the chunk-local softmax resets), and the learned SV bandwidth per layer.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/lm/corpus.h"
#include "svattn/torch/model.h"

namespace svattn::lm {

struct PositionEvalOptions {
  Split split = Split::kTest;
  std::int64_t seq = 0;      ///< window length (>= 2)
  std::int64_t windows = 0;  ///< 0: every window of the split (eval_offsets)
  std::int64_t period = 0;   ///< positions are t mod period (the chunk; >= 1)
  std::int64_t batch = 16;   ///< windows per forward
};

/// Mean next-byte NLL of every target, in bits, overall and per position t mod period of the
/// query within its window (t = 0 ... seq - 1 predicts byte t + 1 from bytes 0 ... t). The windows
/// are lm::evaluate's (eval_offsets), so `bpc` is the same quantity as EvalResult::bpc.
struct PositionEval {
  std::int64_t period = 0;
  std::int64_t windows = 0;
  std::int64_t targets = 0;
  double bpc = 0;                           ///< over every target
  std::vector<double> bpc_by_position;      ///< [period]
  std::vector<std::int64_t> targets_by_position;  ///< [period]

  nlohmann::json to_json() const;
};

/// Throws InvalidArgument for seq < 2, period < 1 or batch < 1. No gradient; the model is put
/// back in training mode if it was.
PositionEval evaluate_by_position(layers::CharLm& model, const Corpus& corpus,
                                  const PositionEvalOptions& options);

/// The SV bandwidth sigma = exp(log_sigma) of every hybrid layer, mean over its heads, in layer
/// order; empty for a model without hybrid layers.
std::vector<double> sigma_per_layer(layers::CharLm& model);

}  // namespace svattn::lm
