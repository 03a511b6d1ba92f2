// E5 character LM on the enwik8 prefix: hybrid vs state-matched sliding window, paired t-test (LibTorch).
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/e5_char_lm/info.h"
#include "experiments/framework/run_header.h"
#include "experiments/options.h"
#include "experiments/result.h"

namespace svattn::experiments::e5_char_lm {

/// A hybrid, the sliding window matched to it, an optional full-softmax reference and an optional
/// ablation: the same hybrid with its SV memory switched off (what the memory adds).
struct Pair {
  std::string hybrid;     ///< hybrid model preset
  std::string swa;        ///< the sliding-window preset matched to it
  std::string reference;  ///< full-softmax reference ("" = none)
  std::string gate;       ///< "chunk" | "token"
  std::string ablation;   ///< the hybrid's memory-off preset ("" = none)
};

/// A preset's fields (the `--set` keys).
struct Settings {
  std::string corpus;  ///< "enwik8" | "shakespeare"
  std::vector<Pair> pairs;
  int seeds = 3;  ///< the first pair's seeds (later pairs the first seed only, unless seeds_every_pair)
  bool seeds_every_pair = false;  ///< every pair runs every seed
  std::int64_t steps = 0, batch = 0, seq = 0, warmup = 0, eval_every = 0, eval_windows = 0;
  std::int64_t test_windows = 0;  ///< 0 = the whole test split
  std::int64_t chunk = 0;         ///< > 0: hybrid chunk override (the window keeps chunk + support)
  std::int64_t local_window = 0;  ///< > 0: W_loc of the sliding-local (window-mode) hybrid presets
  std::string note;
  std::string device = "cpu";  ///< "cuda" on a GPU (scripts/gpu-paper.sh)
  double max_seconds = 0;      ///< > 0: training-time budget per model (the run stops early)
  double lr = 0;               ///< > 0: peak learning rate override (else the model preset's)
  int workers = 1;             ///< seeds trained side by side, one thread each (CPU only)
};

/// One trained and tested model. NaN fields (no matched support, a layer without a value) are
/// null in JSON.
struct Run {
  std::string preset;
  std::uint64_t seed = 0;
  std::string dir;  ///< the run directory (checkpoints, metrics.jsonl)
  std::int64_t parameters = 0;
  std::int64_t window = 0;  ///< sliding window (swa) or 0
  std::int64_t chunk = 0;   ///< hybrid chunk (swa: the window's chunk part)
  double matched_support = std::numeric_limits<double>::quiet_NaN();  ///< swa: the hybrid's measured mean support; NaN otherwise
  double test_bpc = 0;
  std::int64_t test_windows = 0;
  double train_seconds = 0;
  double tokens_per_second = 0;
  std::int64_t steps = 0;  ///< steps trained (fewer than the preset's when max_seconds stopped it)
  std::vector<std::pair<double, double>> valid_curve;    ///< (step, validation BPC)
  std::vector<std::pair<double, double>> gate_curve;     ///< (step, memory share), hybrid
  std::vector<std::pair<double, double>> support_curve;  ///< (step, mean |S ∪ E|), hybrid
  std::vector<double> layer_gate, layer_support;  ///< per layer, last training record (hybrid)
  std::vector<double> layer_sigma;  ///< hybrid: learned SV bandwidth per layer (mean over heads)
  /// Test BPC per query position t mod chunk within the window (the chunk-local softmax resets at
  /// position 0); the same test windows as test_bpc. Empty in results written before it existed.
  std::vector<double> position_bpc;

  /// (validation BPC at the first evaluation at or after 80 % of the steps − final) / the former;
  /// NaN without two such points.
  double last_fifth_improvement() const;
};

/// A pair's runs, one per seed (index = seed index).
struct PairResult {
  Pair pair;
  std::vector<Run> hybrid, swa, reference, ablation;
};

/// What a run measured: render()'s only input. E5.json holds it under `result`, so the report
/// can be rendered again from the file (from_json) without training or reading the corpus.
struct Result : RunHeader {
  Settings settings;  ///< after `--set` (E5.steps also scales warm-up and validation)
  std::vector<std::uint64_t> seeds;
  std::string corpus_label;
  std::string runs_dir;  ///< <out>/E5-runs of the measuring run
  std::vector<PairResult> pairs;

  nlohmann::json to_json() const;
  /// FormatError naming the field when `j` is not an E5 result.
  static Result from_json(const nlohmann::json& j);
};

/// The preset "tiny" | "quick" | "cpu" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// The range of every preset key (the `--set` checks; docs/experiments.md "Ranges of the `--set`
/// keys").
RangeTable ranges();
/// Trains and tests every model of every pair and seed (run directories under <out>/E5-runs; no
/// report written).
Result measure(const ExperimentOptions& options);
/// Writes <out_dir>/E5.md, E5.json (the tables derived from the result, and the result) and plots.
ExperimentResult render(const Result& result, const ExperimentOptions& options);
/// render(measure(options), options).
ExperimentResult run(const ExperimentOptions& options);

}  // namespace svattn::experiments::e5_char_lm
