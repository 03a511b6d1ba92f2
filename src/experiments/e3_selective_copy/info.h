// E3's identity: id, title, the paper's result and what a build without it needs (the
// registry lists it from here, torch-free; the report titles itself from here).
#pragma once
#include "experiments/framework/experiment_info.h"

namespace svattn::experiments::e3_selective_copy {

/// E3's identity in the registry and the report.
inline constexpr ExperimentInfo kInfo = {
    "E3", "Selective copy with growing padding (trained models)",
    "SV ≈ 0.99 recall with support of 11–14 tokens; DeltaNet and linear attention fall to chance",
    "trained selective-copy models (SV hybrid, DeltaNet, linear attention): the LibTorch build "
    "(svattn_experiments_torch); this build has no LibTorch"};

}  // namespace svattn::experiments::e3_selective_copy
