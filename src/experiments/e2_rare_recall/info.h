// E2's identity: id, title, the paper's result and what a build without it needs (the
// registry lists it from here, torch-free; the report titles itself from here).
#pragma once
#include "experiments/framework/experiment_info.h"

namespace svattn::experiments::e2_rare_recall {

/// E2's identity in the registry and the report.
inline constexpr ExperimentInfo kInfo = {
    "E2", "Rare-item recall under skewed redundancy at equal token budget",
    "SV certified selection 0.86 vs H2O heavy hitters 0.32 (even with oracle queries)", ""};

}  // namespace svattn::experiments::e2_rare_recall
