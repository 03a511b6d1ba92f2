// E4's identity: id, title, the paper's result and what a build without it needs (the
// registry lists it from here, torch-free; the report titles itself from here).
#pragma once
#include "experiments/framework/experiment_info.h"

namespace svattn::experiments::e4_icu {

/// E4's identity in the registry and the report.
inline constexpr ExperimentInfo kInfo = {
    "E4", "ICU streams: critical-deterioration hours retained at equal budget",
    "SV 0.80 vs heavy hitters 0.05",
    ""};

}  // namespace svattn::experiments::e4_icu
