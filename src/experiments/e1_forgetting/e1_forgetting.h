// E1 exact forgetting: decremental removal vs retraining from scratch on synthetic, ICU and learned-key streams.
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/e1_forgetting/info.h"
#include "experiments/framework/run_header.h"
#include "experiments/options.h"
#include "experiments/result.h"

namespace svattn::experiments::e1_forgetting {

/// A preset's fields (the `--set` keys).
struct Settings {
  int n = 0;       ///< tokens per trial (ICU: whole stays up to n hours)
  int trials = 0;  ///< trials per stream (`--set E1.trials`; Result::trials)
  std::vector<std::string> streams;
  /// The learned-keys stream (quick, paper): a `keys_model` hybrid LM trained for keys_steps on
  /// the enwik8 prefix, keys of keys_tokens consecutive validation bytes (registry.h,
  /// LearnedKeysSpec).
  std::string keys_model = "tiny";
  std::int64_t keys_steps = 0;
  std::int64_t keys_tokens = 0;
};

/// One deletion (a scenario of one trial of one stream), compared with retraining from scratch
/// and with the two coefficient-decay baselines (zeroing, and multiplying by 0.1).
struct Comparison {
  std::string stream;
  int trial = 0;
  std::string scenario;  ///< margin | error | reserve | random_set | record
  int removed = 0;       ///< tokens removed
  bool partition_equal = false;
  bool hash_equal = false;  ///< SHA-256 of the canonical states equal
  double dalpha = 0;        ///< max |alpha_dec - alpha_retrained| over remaining tokens
  double ddecision = 0;     ///< max over probes |f_dec - f_retrained|
  double dreadout = 0;      ///< max over probes and components |o_dec - o_retrained|
  double decay_dalpha = 0, decay_ddecision = 0, decay_dreadout = 0;  ///< zeroing baseline
  double mult_dalpha = 0, mult_ddecision = 0, mult_dreadout = 0;     ///< multiplicative baseline
  double removed_mass = 0;  ///< sum of alpha of the removed tokens before removal
  long events = 0, repairs = 0, fallbacks = 0;
  std::string status;  ///< the memory's status after the removal
  double remove_seconds = 0, retrain_seconds = 0;
  std::string repro;  ///< folder with a reproduction when the hashes differ, else empty

  /// The entry of E1.json's `comparisons` (nested `decay_zero` / `decay_mult` objects).
  nlohmann::json to_json() const;
  /// FormatError naming the field when `j` is not such an entry. A max |Δ| written as null (JSON
  /// has no infinity; a NaN difference counts as infinite) reads as +infinity.
  static Comparison from_json(const nlohmann::json& j);
};

/// One stream's run: its trials' shape and every deletion; a pending stream (the learned keys
/// without keys) has only its name, description and the reason.
struct StreamResult {
  std::string name;
  std::string description;
  std::string status = "ok";  ///< ok | pending
  std::string pending_reason;
  int n = 0, d = 0, trials = 0;  ///< n, d of the last trial (ICU: hours up to Settings::n)
  double sigma_median = 0;       ///< median RBF bandwidth over trials
  double C = 0;
  std::vector<Comparison> comparisons;
  double seconds = 0;
};

/// What a run measured: render()'s only input. E1.json holds it under `result` (to_json), so the
/// report can be rendered again from the file (from_json) without re-solving or reading data.
struct Result : RunHeader {
  Settings settings;                          ///< after `--set`
  int trials = 0;                             ///< trials per stream run (after `--set`)
  std::vector<std::string> selected_streams;  ///< `--set E1.streams`, else the preset's
  std::string learned_keys;  ///< the learned keys' file (given or trained); empty when none
  std::string data_dir, data_dir_source;  ///< where the ICU data were read; empty when none
  std::vector<StreamResult> streams;      ///< one per selected stream, in that order

  nlohmann::json to_json() const;
  /// FormatError naming the field when `j` is not an E1 result.
  static Result from_json(const nlohmann::json& j);
};

/// The preset "tiny" | "quick" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// The range of every preset key (the `--set` checks; docs/experiments.md "Ranges of the `--set`
/// keys").
RangeTable ranges();
/// Trains (or reuses) the learned keys when the preset asks for them and this build can, then
/// runs every trial of every selected stream. Writes no report; the only files are the trained
/// keys and a reproduction folder per deletion whose state is not bit-identical to retraining
/// (under options.out_dir).
Result measure(const ExperimentOptions& options);
/// Writes <out_dir>/E1.md, E1.json (the result and the tables derived from it) and the plots.
ExperimentResult render(const Result& result, const ExperimentOptions& options);
/// render(measure(options), options).
ExperimentResult run(const ExperimentOptions& options);
/// E1 stream names known to run() (any preset).
std::vector<std::string> stream_names();

}  // namespace svattn::experiments::e1_forgetting
