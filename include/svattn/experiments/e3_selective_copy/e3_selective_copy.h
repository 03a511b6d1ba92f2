// E3 selective copy with growing padding: trained hybrid vs sliding window, linear attention, DeltaNet (LibTorch).
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/experiments/options.h"
#include "svattn/experiments/result.h"

namespace svattn::experiments::e3_selective_copy {

/// The preset "tiny" | "quick" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// Runs the experiment: writes <out_dir>/E3.md, .json and plots; returns the result.
ExperimentResult run(const ExperimentOptions& options);

}  // namespace svattn::experiments::e3_selective_copy
