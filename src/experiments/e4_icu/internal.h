// What E4's settings, measure, result and report units share (not installed): the methods
// compared, the shortest stay used and the JSON of the plain structs.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/e4_icu/e4_icu.h"
#include "experiments/selection.h"

namespace svattn::experiments::e4_icu {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Settings, datasets, max_stays, fractions, headline_fraction, random_draws)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Tally, critical_retained, critical_total, retained_tokens, budget_tokens, per_stay)

/// Stays shorter than this many hours are skipped.
inline constexpr int kMinStayHours = 12;

/// Every method, in the order of the report's rows.
inline const std::vector<Method> kMethods = {Method::kSv,           Method::kSvBounded, Method::kHeavyHitters,
                                      Method::kH2o,          Method::kRecency,   Method::kRandom};

/// The preset "tiny" | "quick" | "paper" (any other name: quick).
Settings preset_settings(const std::string& name);

}  // namespace svattn::experiments::e4_icu
