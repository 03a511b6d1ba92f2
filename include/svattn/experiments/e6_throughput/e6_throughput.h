// E6 training throughput of the 3m presets and the ratio to full softmax (LibTorch).
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/experiments/options.h"
#include "svattn/experiments/result.h"

namespace svattn::experiments::e6_throughput {

/// The preset "tiny" | "quick" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// Runs the experiment: writes <out_dir>/E6.md, .json and plots; returns the result.
ExperimentResult run(const ExperimentOptions& options);

}  // namespace svattn::experiments::e6_throughput
