// E1's identity: id, title, the paper's result and what a build without it needs (the
// registry lists it from here, torch-free; the report titles itself from here).
#pragma once
#include "experiments/framework/experiment_info.h"

namespace svattn::experiments::e1_forgetting {

/// E1's identity in the registry and the report.
inline constexpr ExperimentInfo kInfo = {
    "E1", "Exact forgetting: decremental removal vs retraining from scratch",
    "partition match 98–100 %; median decision-function deviation ~1e-9 (Gaussian, ICU), ~1e-13 "
    "(learned keys); worst 1.1e-2 (near-duplicates); coefficient decay 1e-2 … 1e-1",
    ""};

}  // namespace svattn::experiments::e1_forgetting
