// E5's identity: id, title, the paper's result and what a build without it needs (the
// registry lists it from here, torch-free; the report titles itself from here).
#pragma once
#include "experiments/framework/experiment_info.h"

namespace svattn::experiments::e5_char_lm {

/// E5's identity in the registry and the report.
inline constexpr ExperimentInfo kInfo = {
    "E5", "Character LM: hybrid vs state-matched sliding-window transformer",
    "3.22M params: 2.178 vs 2.383 BPC (8.6 %, p = 0.001); 10M params: no advantage",
    "trained character LMs (the LM trainer in src/lm, LibTorch) on the enwik8 4.15 MB prefix: "
    "the LibTorch build (svattn_experiments_torch); this build has no LibTorch"};

}  // namespace svattn::experiments::e5_char_lm
