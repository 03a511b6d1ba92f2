// One training step of the character LMs and its inputs (private to src/lm): the batch tensor of
// a set of windows, the learning-rate schedule, forward + backward + clipping + AdamW.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "svattn/lm/corpus.h"
#include "svattn/lm/presets.h"
#include "svattn/torch/model.h"

namespace svattn::lm::detail {

inline constexpr double kLn2 = 0.69314718055994530942;

/// Tokens [B, T + 1] of the windows starting at `offsets`.
torch::Tensor window_tensor(const Corpus& corpus, const std::vector<std::int64_t>& offsets, std::int64_t seq);

/// Learning rate at (1-based) step: linear warm-up to lr over `warmup` steps, then cosine decay to
/// min_lr_ratio * lr at `total`.
double schedule(const TrainHyper& h, std::int64_t step, std::int64_t total);

/// The device of the model's parameters (where its batches go).
torch::Device model_device(layers::CharLm& model);

struct StepOut {
  double loss = 0;       ///< mean cross-entropy (nats / byte)
  double grad_norm = 0;  ///< before clipping
};
/// Forward, backward, clipping at `clip` (<= 0: none) and the optimiser's step on `cpu_windows`
/// ([B, T + 1], moved to the model's device).
StepOut train_step(layers::CharLm& model, torch::optim::Optimizer& opt, const torch::Tensor& cpu_windows,
                   double clip);

/// Sets the learning rate of every AdamW group.
void set_lr(torch::optim::Optimizer& opt, double lr);

}  // namespace svattn::lm::detail
