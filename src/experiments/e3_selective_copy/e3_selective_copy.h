// E3 selective copy with growing padding: trained hybrid vs sliding window, linear attention, DeltaNet (LibTorch).
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/e3_selective_copy/diagnosis.h"
#include "experiments/e3_selective_copy/task.h"
#include "experiments/e3_selective_copy/info.h"
#include "experiments/options.h"
#include "experiments/result.h"

namespace svattn::experiments::e3_selective_copy {

/// A preset's fields; their JSON names are the `--set` keys (docs/experiments.md, E3).
struct Settings {
  SelectiveCopyTask task;
  std::int64_t d_model = 64;
  std::int64_t n_layers = 2;
  std::int64_t n_heads = 2;  ///< hybrid, sliding window, softmax; linear / DeltaNet: recurrent_heads
  std::int64_t recurrent_heads = 0;  ///< 0: state-matched to the hybrid
  std::int64_t chunk = 16;
  std::string local = "chunk";    ///< hybrid local path: "chunk" (the paper's) | "window" (sliding)
  std::int64_t local_window = 1;  ///< window mode: W_loc, the fewest recent tokens seen locally
  double C = 1.0 / 8;
  int fista_iterations = 60;
  double mask_tol = 1e-3;
  std::string gate = "token";  ///< "token" | "chunk"
  double gate_bias = 0.0;      ///< initial a_h
  double sigma = 1.0;          ///< initial RBF bandwidth
  bool learn_sigma = true;
  bool bounded = false;
  double mu = 1e-6;              ///< problem ridge (both SV paths)
  bool eval_exact = false;       ///< also evaluate the trained hybrid through the other path
  std::string path = "batched";  ///< SV path used for training
  std::string eval_path;         ///< SV path of the main evaluation ("" = the training path)
  bool save_models = false;      ///< write <out>/E3-<method>.pt after training
  bool reuse_models = false;     ///< load <out>/E3-<method>.pt when present instead of training
  int steps = 300;
  int batch = 32;
  double lr = 3e-3;
  double weight_decay = 0.01;
  int warmup = 20;
  int eval_sequences = 64;
  /// Factors >= long_factor are evaluated on long_eval_sequences sequences (0: eval_sequences),
  /// the same ones for every method (the exact path's cost grows steeply with the support).
  int long_factor = 16;
  int long_eval_sequences = 0;
  std::vector<int> factors = {1, 2, 4, 8, 16};
  long eval_tokens_per_forward = 4096;  ///< eval batch = max(1, this / length)
  std::vector<std::string> methods = {"hybrid", "swa", "linear", "deltanet"};
  std::int64_t window = 0;  ///< > 0: fixed sliding window (else chunk + the hybrid's support)
  /// Seeds of independent runs; empty: the one seed of --seed. With two or more, the report adds
  /// mean ± sd and the per-seed values of every method and padding.
  std::vector<std::int64_t> seeds;
  int workers = 1;  ///< seeds run side by side, one LibTorch thread each (results as sequential)
};
void to_json(nlohmann::json& j, const Settings& s);
void from_json(const nlohmann::json& j, Settings& s);

/// One method's recall at one padding factor. NaN fields are null in JSON.
struct EvalPoint {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  int factor = 0;
  int length = 0;
  double recall = 0;
  long outputs = 0;
  std::vector<double> recall_per_output;  ///< accuracy of the j-th output symbol
  std::vector<std::vector<double>> support;           ///< [layer][head] |S ∪ E|, hybrid only
  std::vector<std::vector<double>> distinct_support;  ///< [layer][head] distinct support keys
  double duplicate_alpha_spread = 0;  ///< max |α_i − α_j| over bitwise-equal support keys
  long duplicate_support_tokens = 0;  ///< support tokens that duplicate an earlier support key
  std::vector<double> gate_per_layer;  ///< hybrid: memory share over tokens of chunks >= 1
  double gate_mean = kNaN;
  double partition_agreement = kNaN;  ///< hybrid, batched vs exact on the same keys (optional)
  double coefficient_error = kNaN;
  double seconds = 0;  ///< wall time of this evaluation
};

/// One method trained on one seed and evaluated at every padding. Its model configuration is
/// model_config(settings, method, window, heads) (the driver's), so it is not stored.
struct MethodResult {
  std::string method;  ///< hybrid | swa | linear | deltanet | softmax
  std::int64_t heads = 0;
  std::int64_t window = 1;  ///< the model's sliding window (used by swa only)
  std::int64_t parameters = 0;
  double train_seconds = 0;
  std::vector<std::pair<int, double>> loss_curve;  ///< (step, mean loss over the logging period)
  std::vector<double> grad_norm_curve;             ///< mean pre-clip gradient norm, same periods
  double final_train_loss = 0;
  std::vector<EvalPoint> eval;
  std::vector<EvalPoint> eval_exact;  ///< hybrid with eval_exact: the same weights, other path
  double eval_exact_seconds = 0;
  std::vector<std::vector<double>> sigma;  ///< hybrid: learned RBF bandwidth per layer and head
  double state_per_layer = 0;  ///< floats of state one layer carries at the longest length
  bool reused = false;         ///< loaded from a saved model instead of trained
  /// hybrid with chunk 1: per output position at 1x, its predictions, support and gate.
  std::vector<OutputDiagnosis> outputs;
};

/// Every method of one seed, with the state matching between them.
struct SeedRuns {
  std::uint64_t seed = 0;
  std::vector<MethodResult> results;
  double support = EvalPoint::kNaN;       ///< the hybrid's mean support at the training length
  double hybrid_state = EvalPoint::kNaN;  ///< the hybrid's floats per layer at that length
  std::int64_t window = 0;                ///< the sliding window matched to the hybrid
  std::int64_t longest = 0;               ///< the longest evaluation length
  bool recurrent_covers = false;          ///< linear and DeltaNet carry >= the hybrid's state
  const MethodResult* find(const std::string& method) const;
};

/// What a run measured: render()'s only input. E3.json holds it under `result`, so the report
/// can be rendered again from the file (from_json) without training.
struct Result {
  std::string preset;
  std::string overrides;  ///< the applied `--set` items, as written
  Settings settings;      ///< after `--set`
  std::vector<SeedRuns> runs;  ///< one per seed, the first seed first
  nlohmann::json machine;
  std::string created;
  double measure_seconds = 0;

  nlohmann::json to_json() const;
  /// FormatError naming the field when `j` is not an E3 result.
  static Result from_json(const nlohmann::json& j);
};

/// The preset "tiny" | "quick" | "cpu" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// The range of every preset key (the `--set` checks; docs/experiments.md "Ranges of the `--set`
/// keys").
RangeTable ranges();
/// Trains and evaluates every method on every seed (model files only with save; no report).
Result measure(const ExperimentOptions& options);
/// Writes <out_dir>/E3.md, E3.json (the tables derived from the result, and the result) and plots.
ExperimentResult render(const Result& result, const ExperimentOptions& options);
/// render(measure(options), options).
ExperimentResult run(const ExperimentOptions& options);

}  // namespace svattn::experiments::e3_selective_copy
