// E2 rare-item recall under skewed redundancy at equal token budget.
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/experiments/options.h"
#include "svattn/experiments/result.h"

namespace svattn::experiments::e2_rare_recall {

/// The preset "tiny" | "quick" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// Runs the experiment: writes <out_dir>/E2.md, .json and plots; returns the result.
ExperimentResult run(const ExperimentOptions& options);

}  // namespace svattn::experiments::e2_rare_recall
