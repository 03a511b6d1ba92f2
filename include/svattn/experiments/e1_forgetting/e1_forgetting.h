// E1 exact forgetting: decremental removal vs retraining from scratch on synthetic, ICU and learned-key streams.
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/experiments/options.h"
#include "svattn/experiments/result.h"

namespace svattn::experiments::e1_forgetting {

/// The preset "tiny" | "quick" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// Runs the experiment: writes <out_dir>/E1.md, .json and plots; returns the result.
ExperimentResult run(const ExperimentOptions& options);
/// E1 stream names known to run() (any preset).
std::vector<std::string> stream_names();

}  // namespace svattn::experiments::e1_forgetting
