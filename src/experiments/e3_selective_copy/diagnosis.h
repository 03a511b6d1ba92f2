// Per-output diagnosis of a trained E3 hybrid: what each output position predicts and what the
// memory its query reads holds (support, gate), and the step at which training converged.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/e3_selective_copy/task.h"
#include "svattn/torch/model.h"

namespace svattn::experiments::e3_selective_copy {

/// One output position j = 1 ... k (the go marker is output 1, query j - 1 output j).
struct OutputDiagnosis {
  int output = 0;
  double recall = 0;
  /// [k]: share of the predictions equal to data symbol i = 1 ... k (repeated symbols count for
  /// each index they occupy, so a row may sum above 1).
  std::vector<double> predicted_symbol_share;
  std::vector<double> support_per_layer;  ///< |S ∪ E| of the memory this query reads (mean over heads)
  std::vector<double> gate_per_layer;     ///< the gate's memory share at this query (mean over heads)

  nlohmann::json to_json() const;
  static OutputDiagnosis from_json(const nlohmann::json& j);
};

/// Diagnoses `model` (a hybrid with chunk 1) on `sequences` fresh sequences of `task` drawn from
/// `seed`. Support per position is read from the layer diagnostics of two prefix forwards (the
/// memory of position t is the last one of the prefix 0 ... t). Empty for another chunk.
std::vector<OutputDiagnosis> diagnose_outputs(layers::CharLm& model, const SelectiveCopyTask& task,
                                              int sequences, std::uint64_t seed);

/// The first logged step whose mean training loss is below `threshold` (-1: never).
int steps_to_loss(const std::vector<std::pair<int, double>>& loss_curve, double threshold);

}  // namespace svattn::experiments::e3_selective_copy
