// Checkpoint directories of a run (private to src/lm): finding, verifying, writing atomically and
// restoring the optimiser and generator state (docs/lm.md "Training, checkpoints, resume").
#pragma once
#include <torch/torch.h>

#include <string>

#include "svattn/lm/checkpoint.h"

namespace svattn::lm::detail {

inline constexpr const char* kLatest = "LATEST";

/// The checkpoint directory a path names: a ckpt-* directory (has MANIFEST.json) or a run
/// directory (has LATEST). Throws IoError / FormatError.
std::string checkpoint_dir_of(const std::string& path);

struct CheckpointFiles {
  CheckpointConfig config;
  CheckpointState state;
};
/// Verifies MANIFEST.json (every listed file present with its size and SHA-256) and reads
/// config.json and state.json. Throws FormatError naming the file.
CheckpointFiles verify_checkpoint(const std::string& dir);

/// Writes ckpt-<step> into `run_dir` (model, optimiser, generator state, config, state, manifest;
/// every file synced), points LATEST at it by an atomic rename and removes older checkpoints. A
/// crash anywhere leaves the previous LATEST and its checkpoint intact.
void write_checkpoint(const std::string& run_dir, layers::CharLm& model, torch::optim::Optimizer& optimizer,
                      const CheckpointConfig& config, const CheckpointState& state);

/// Loads a checkpoint's parameters into `model`, checking every tensor's shape against the model
/// built from its config; then the optimiser's state and LibTorch's CPU generator state.
void load_model(layers::CharLm& model, const std::string& ckpt_dir);
void load_training_state(torch::optim::Optimizer& optimizer, const std::string& ckpt_dir);

/// Writes `text` to `path` and fsyncs it. Throws IoError.
void write_text_synced(const std::string& path, const std::string& text);

}  // namespace svattn::lm::detail
