// What E2's settings, measure, result and report units share (not installed): the methods
// compared, the preset table and the JSON of the settings and outcomes.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/e2_rare_recall/e2_rare_recall.h"
#include "experiments/selection.h"

namespace svattn::experiments::e2_rare_recall {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Settings, tokens, dim, patterns, rare_share, noise, budgets, headline_budget, seeds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Outcome, recall, retrieved, coverage, kept, support, truncated)

/// Every method, in the order of the report's rows.
inline const std::vector<Method> kMethods = {
    Method::kSv,           Method::kSvBounded, Method::kH2o,     Method::kH2oOracle,
    Method::kHeavyHitters, Method::kSnapKv,    Method::kRecency, Method::kRandom};

/// The preset "tiny" | "quick" | "paper" (any other name: quick).
Settings preset_settings(const std::string& name);

}  // namespace svattn::experiments::e2_rare_recall
