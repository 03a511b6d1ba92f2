// Checkpoints of the character LMs: the typed config.json and state.json a checkpoint holds, and
// loading a checkpoint's model (manifest verified) for evaluation. The directory layout and the
// atomic writes are in src/lm/checkpoint.cpp (docs/lm.md "Training, checkpoints, resume").
#pragma once
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include "svattn/lm/corpus.h"
#include "svattn/lm/presets.h"
#include "svattn/lm/train_settings.h"
#include "svattn/torch/model.h"

namespace svattn::lm {

inline constexpr int kCheckpointVersion = 1;

/// The corpus a run trained on, as config.json records it.
struct CorpusRecord {
  std::string corpus;      ///< "enwik8" | "shakespeare"; empty when a path was given
  std::string path_given;  ///< --data as given; empty for a named corpus
  std::string file;        ///< the file read
  std::string label;
  std::int64_t bytes = 0;
  std::string sha256;

  static CorpusRecord of(const Corpus& corpus, const DataSpec& spec);
  nlohmann::json to_json() const;
  static CorpusRecord from_json(const nlohmann::json& j);
};

/// config.json of a checkpoint (and the run's summary.json before its totals).
struct CheckpointConfig {
  int version = kCheckpointVersion;
  std::string preset;
  std::string description;
  layers::LmConfig model;
  TrainHyper train;
  std::int64_t steps = 0;  ///< the schedule's horizon
  std::uint64_t seed = kDefaultSeed;
  CorpusRecord data;
  std::int64_t parameters = 0;

  nlohmann::json to_json() const;
  /// Throws FormatError (a missing or mistyped key) or InvalidArgument (a value out of range).
  static CheckpointConfig from_json(const nlohmann::json& j);
  /// The run settings it holds (what --set may not change on --resume).
  RunSettings settings() const { return {train, model, seed}; }
};

/// state.json of a checkpoint: where the run stands.
struct CheckpointState {
  std::int64_t step = 0;
  std::int64_t metrics_offset = 0;  ///< bytes of metrics.jsonl at the checkpoint
  double last_valid_bpc = std::nan("");  ///< null in the file while no validation ran
  double trained_seconds = 0;
  std::int64_t trained_tokens = 0;

  nlohmann::json to_json() const;
  static CheckpointState from_json(const nlohmann::json& j);
};

/// A model loaded from a checkpoint (a run directory with LATEST, or a ckpt-* directory).
struct LoadedCheckpoint {
  std::string directory;  ///< the ckpt-* directory read
  CheckpointConfig config;
  std::int64_t step = 0;
  layers::CharLm model{nullptr};
};

/// Verifies the manifest (SHA-256 of every file) and loads the model in eval mode. `modify` may
/// change settings that do not change the parameters (e.g. the hybrid's global path).
/// Throws IoError (missing) or FormatError (truncated/corrupt, naming the file).
LoadedCheckpoint load_checkpoint(const std::string& path,
                                 const std::function<void(layers::LmConfig&)>& modify = {});

/// The corpus a checkpoint was trained on (its data section), read from `data_dir` / $SVATTN_DATA
/// / the default directory; `override_spec` with a corpus or path replaces it.
Corpus checkpoint_corpus(const CheckpointConfig& config, const DataSpec& override_spec);

}  // namespace svattn::lm
