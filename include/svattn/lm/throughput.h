// Throughput of a character-LM preset: tokens per second of full training steps.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "svattn/lm/corpus.h"
#include "svattn/lm/presets.h"

namespace svattn::lm {

struct Throughput {
  std::string preset;
  std::int64_t parameters = 0;
  double tokens_per_second = 0;
  double seconds_per_step = 0;
  double sv_forward_share = 0;      ///< hybrid: share of the step spent in the SV memory forward
  double support_mean = std::nan("");
};

/// Tokens/s of `steps` full training steps (forward, backward, AdamW) after `warmup` untimed
/// steps, on the corpus' train split, on `device` ("cpu", "cuda", "cuda:N").
Throughput measure_throughput(const Preset& preset, const Corpus& corpus, std::int64_t steps,
                              std::int64_t warmup, std::uint64_t seed, const std::string& device = "cpu");

}  // namespace svattn::lm
