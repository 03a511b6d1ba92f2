// E4 ICU streams: critical-deterioration hours retained at equal budget (MIMIC-III demo, PhysioNet 2012).
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/experiments/options.h"
#include "svattn/experiments/result.h"

namespace svattn::experiments::e4_icu {

/// The preset "tiny" | "quick" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// Runs the experiment: writes <out_dir>/E4.md, .json and plots; returns the result.
ExperimentResult run(const ExperimentOptions& options);

}  // namespace svattn::experiments::e4_icu
