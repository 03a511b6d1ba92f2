// Model and training presets of the character LMs (docs/layers.md §3–§11): hybrid SV attention and
// the baselines at ~0.8M (E5's cpu preset), ~3.2M and ~10M parameters, plus a tiny preset for
// tests. Configs round-trip JSON (checkpoints store them).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "svattn/torch/model.h"

namespace svattn::lm {

/// Optimisation settings of a run (AdamW, linear warm-up then cosine decay, gradient clipping).
struct TrainHyper {
  /// Upper bounds validate() enforces (docs/lm.md "Resource bounds"): batch and seq each, and the
  /// tokens of one step (batch x seq), whose activations the step holds at once.
  static constexpr std::int64_t kMaxBatch = 4096;
  static constexpr std::int64_t kMaxSeq = 65536;
  static constexpr std::int64_t kMaxStepTokens = std::int64_t{1} << 20;
  std::int64_t batch = 16;         ///< sequences per step, in [1, kMaxBatch]
  std::int64_t seq = 256;          ///< tokens per sequence (targets per window), in [2, kMaxSeq]
  double lr = 1e-3;                ///< peak learning rate
  double min_lr_ratio = 0.1;       ///< cosine floor as a fraction of lr
  std::int64_t warmup = 200;       ///< linear warm-up steps (from lr / warmup)
  double weight_decay = 0.1;       ///< AdamW, on matrices only (dim >= 2)
  /// Also decay the hybrid gate's matrices (parameters named gate_*); off: the gate is free.
  bool gate_weight_decay = false;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double clip = 1.0;               ///< global gradient-norm clip (<= 0: off)
  std::int64_t eval_every = 250;   ///< validation BPC period (steps; 0: only at the end)
  std::int64_t eval_windows = 64;  ///< validation windows (evenly spaced; 0: the whole split)
  std::int64_t checkpoint_every = 250;  ///< checkpoint period (steps; 0: only at the end)
  std::int64_t log_every = 10;     ///< JSONL train record period (steps)

  /// Throws InvalidArgument naming the bad field.
  void validate() const;
};

struct Preset {
  std::string name;
  std::string description;
  layers::LmConfig model;
  TrainHyper train;
};

/// Names accepted by make_preset.
std::vector<std::string> preset_names();

/// Average |S ∪ E| per head that the state-matched sliding window uses when no hybrid
/// measurement is given: hybrid-3m on the enwik8 prefix, seed 1234, 50 steps (warm-up 10), mean of
/// the per-layer support over the last quarter of the log (steps 45-50) = 35.9 (docs/lm.md). E5
/// should pass its own hybrid run (--match-run).
inline constexpr double kDefaultMatchedSupport = 36.0;

/// The same for tiny-swa: the tiny hybrid on tiny-shakespeare, seed 1234, 100 steps, last quarter
/// (steps 76-100) = 17.9 (docs/lm.md).
inline constexpr double kDefaultTinyMatchedSupport = 18.0;

/// W_loc of the hybrid-window-* presets (their local path holds 64 to 127 tokens at chunk 64).
inline constexpr std::int64_t kWindowPresetLocal = 64;

/// Builds a preset. For swa-* the window is the hybrid's local width (chunk; for swa-window
/// W_loc + chunk - 1) + matched_support (docs/layers.md §3), where
/// matched_support < 0 means kDefaultMatchedSupport; tiny-swa likewise with chunk 32 and
/// kDefaultTinyMatchedSupport. Throws InvalidArgument listing the names.
Preset make_preset(const std::string& name, double matched_support = -1);

/// Mean of the hybrid layers' support sizes over the train records of a run's metrics.jsonl
/// from its last quarter (at least one record). Throws IoError / FormatError.
double average_support_from_run(const std::string& run_dir);

nlohmann::json to_json(const layers::LmConfig& c);
layers::LmConfig lm_config_from_json(const nlohmann::json& j);
nlohmann::json to_json(const TrainHyper& h);
TrainHyper train_hyper_from_json(const nlohmann::json& j);

}  // namespace svattn::lm
