// E4's presets and the ranges of its `--set` keys (docs/experiments.md "E4").
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "common.h"
#include "internal.h"
#include "svattn/errors.h"
#include "experiments/icu.h"
#include "experiments/report.h"
#include "experiments/selection.h"
#include "experiments/streams.h"

namespace svattn::experiments::e4_icu {
Settings preset_settings(const std::string& name) {
  if (name == "tiny") return {{"mimic"}, 8, {0.1, 0.3}, 0.1, 2};
  if (name == "paper") return {{"mimic", "physionet2012"}, 0, {0.05, 0.1, 0.2, 0.3, 0.5}, 0.1, 10};
  return {{"mimic"}, 0, {0.05, 0.1, 0.2, 0.3, 0.5}, 0.1, 5};
}

nlohmann::json preset(const std::string& name) { return preset_settings(name); }

RangeTable ranges() {
  RangeTable t;
  t.keys = {{"datasets", 0, 0, false, 1, 2, {"mimic", "physionet2012"}},
            {"max_stays", 0, 1000000},
            {"fractions", 0, 1, true, 1, 16},
            {"headline_fraction", 0, 1, true},
            {"random_draws", 1, 10000}};
  t.relations = [](const std::string& id, const nlohmann::json& s) {
    for (const char* key : {"datasets", "fractions"}) {
      const auto& v = s[key];
      for (std::size_t i = 0; i < v.size(); ++i)
        for (std::size_t k = 0; k < i; ++k)
          if (v[i] == v[k]) bad(id + "." + key, "a list of distinct items", v);
    }
    const auto& f = s["fractions"];
    if (std::find(f.begin(), f.end(), s["headline_fraction"]) == f.end())
      bad(id + ".headline_fraction", "one of the fractions " + f.dump(), s["headline_fraction"]);
  };
  return t;
}

}  // namespace svattn::experiments::e4_icu
