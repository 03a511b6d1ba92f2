// E2's presets and the ranges of its `--set` keys (docs/experiments.md "E2").
#include <algorithm>
#include <string>

#include "internal.h"

namespace svattn::experiments::e2_rare_recall {

Settings preset_settings(const std::string& name) {
  if (name == "tiny") return {120, 8, 3, 0.1, 0.3, {6, 12, 24}, 24, 2};
  if (name == "paper") return {2000, 16, 4, 0.05, 0.3, {50, 100, 200, 400}, 200, 20};
  return {640, 16, 4, 0.05, 0.3, {16, 32, 64, 128}, 64, 10};
}

nlohmann::json preset(const std::string& name) { return preset_settings(name); }

RangeTable ranges() {
  RangeTable t;
  t.keys = {{"tokens", 8, 20000},     {"dim", 1, 1024},       {"patterns", 1, 10000},
            {"rare_share", 0, 1},     {"noise", 0, 100},      {"budgets", 1, 20000, false, 1, 64},
            {"headline_budget", 1, 20000}, {"seeds", 1, 10000}};
  t.relations = [](const std::string& id, const nlohmann::json& s) {
    const int T = s["tokens"].get<int>();
    const auto& b = s["budgets"];
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (b[i].get<int>() > T)
        bad(id + ".budgets[" + std::to_string(i) + "]", "<= tokens (" + std::to_string(T) + ")",
            b[i]);
      for (std::size_t k = 0; k < i; ++k)
        if (b[i] == b[k]) bad(id + ".budgets", "a list of distinct budgets", b);
    }
    if (std::find(b.begin(), b.end(), s["headline_budget"]) == b.end())
      bad(id + ".headline_budget", "one of the budgets " + b.dump(), s["headline_budget"]);
    if (s["patterns"].get<int>() > T)
      bad(id + ".patterns", "<= tokens (" + std::to_string(T) + ")", s["patterns"]);
  };
  return t;
}

}  // namespace svattn::experiments::e2_rare_recall
