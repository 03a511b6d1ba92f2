// E7 applications: surgical fact forgetting, exact knowledge editing, patient erasure from the audited store (needs svattn_store).
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/experiments/options.h"
#include "svattn/experiments/result.h"

namespace svattn::experiments::e7_applications {

/// The preset "tiny" | "quick" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// Runs the experiment: writes <out_dir>/E7.md, .json and plots; returns the result.
ExperimentResult run(const ExperimentOptions& options);

}  // namespace svattn::experiments::e7_applications
