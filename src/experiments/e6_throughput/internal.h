// What E6's settings, measure, result and report units share (not installed): the JSON of the
// settings and the preset table.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "experiments/e6_throughput/e6_throughput.h"

namespace svattn::experiments::e6_throughput {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Settings, presets, batch, seq, steps, warmup, corpus, device)

/// The preset "tiny" | "quick" | "paper" (any other name: paper).
Settings e6_preset(const std::string& name);

}  // namespace svattn::experiments::e6_throughput
