// Resumable trainer of the character LMs: AdamW with warm-up + cosine, gradient clipping, fixed
// seeds, periodic validation BPC, atomic checkpoints (survive kill -9), JSONL metrics and a PNG of
// the curves. Includes the rest of the LM stack's API: checkpoints, evaluation, throughput,
// threads and devices, and the run settings' field table.
#pragma once
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "svattn/lm/checkpoint.h"
#include "svattn/lm/corpus.h"
#include "svattn/lm/evaluation.h"
#include "svattn/lm/presets.h"
#include "svattn/lm/runtime.h"
#include "svattn/lm/throughput.h"
#include "svattn/lm/train_settings.h"
#include "svattn/torch/model.h"

namespace svattn::lm {

/// Whether a parameter name belongs to a hybrid gate (a dotted component starting "gate_").
bool is_gate_parameter(const std::string& name);
/// The AdamW groups of a model: {matrices, weight_decay} and {the rest, 0}; the gate's matrices
/// decay only with h.gate_weight_decay.
std::vector<torch::optim::OptimizerParamGroup> param_groups(torch::nn::Module& model, const TrainHyper& h);

struct TrainOptions {
  std::string preset = "tiny";
  DataSpec data;
  std::string out;                  ///< run directory (created)
  std::int64_t steps = 1000;        ///< total steps (the schedule's horizon)
  bool resume = false;              ///< continue from out/LATEST if present
  /// Overrides of the preset's settings (`--set KEY=VALUE`, keys of run_settings_fields()), applied
  /// in order; on --resume each must equal the checkpoint's value. Unset seed: kDefaultSeed (or the
  /// checkpoint's on resume).
  std::vector<Setting> settings;
  double matched_support = -1;      ///< swa-*: average support to match (< 0: default; new runs only)
  std::string match_run;            ///< swa-*: read the average support from this hybrid run (new runs only)
  int threads = 2;
  /// LibTorch device of the model and its batches: "cpu", "cuda", "cuda:1" (scripts/gpu-paper.sh).
  /// A CUDA device needs a CUDA build of LibTorch and a visible GPU (InvalidArgument otherwise);
  /// resuming a checkpoint works on the CPU only.
  std::string device = "cpu";
  /// > 0: stop after the step that brings the training time past this many seconds, then
  /// validate and checkpoint as at the end (the schedule keeps the horizon `steps`).
  double max_seconds = 0;
  bool progress = true;             ///< progress line on stderr (throttled)
  bool plot = true;                 ///< PNG of the curves at the end (gnuplot)

  /// Appends the override KEY = value (InvalidArgument for an unknown key or a value of another
  /// type): `o.set("batch", 8)`, `o.set("gate", "token")`.
  template <typename T>
  void set(const std::string& key, const T& value) {
    settings.push_back(make_setting(key, field_value(value)));
  }
};

struct StepRecord {
  std::int64_t step = 0;            ///< 1-based number of the step just taken
  double loss = 0;                  ///< mean cross-entropy (nats / byte) of the step's batch
  double lr = 0;
  double grad_norm = 0;             ///< before clipping
};

struct TrainResult {
  std::int64_t start_step = 0;      ///< step the run started (or resumed) from
  std::int64_t end_step = 0;
  std::vector<StepRecord> steps;    ///< every step taken in this call
  double final_valid_bpc = std::nan("");
  double tokens_per_second = 0;     ///< training steps only (no eval / checkpoint time)
  double seconds = 0;
  std::int64_t parameters = 0;
};

/// One run: builds a fresh model or resumes from the run directory's latest checkpoint.
class Trainer {
 public:
  /// Throws InvalidArgument (bad options, --resume mismatch, out dir holds a run without
  /// --resume), IoError (data, directory), FormatError (corrupt checkpoint).
  explicit Trainer(TrainOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Trains up to options.steps. `stop_after` >= 0 stops after that global step without the
  /// final checkpoint, validation or plot (a simulated crash, for tests).
  TrainResult run(std::int64_t stop_after = -1);

  std::int64_t step() const;
  const Preset& preset() const;
  const Corpus& corpus() const;
  layers::CharLm& model();
  std::int64_t parameters() const;
  /// The run's config (what config.json in a checkpoint holds).
  const CheckpointConfig& config() const;
  nlohmann::json config_json() const { return config().to_json(); }

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// Writes train.dat / valid.dat from run_dir/metrics.jsonl and renders curves.png with gnuplot.
/// Returns a one-line message (what was written, or why the PNG was skipped).
std::string plot_run(const std::string& run_dir);

}  // namespace svattn::lm
