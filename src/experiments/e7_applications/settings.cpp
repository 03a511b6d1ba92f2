// E7's presets and the ranges of its `--set` keys (docs/experiments.md "E7").
#include <string>

#include "internal.h"

namespace svattn::experiments::e7_applications {

Settings preset_settings(const std::string& name) {
  if (name == "tiny") return {10, 3, 4, 4, 6, 2, 4, 12, {1, 10}, 200};
  if (name == "paper") return {150, 4, 50, 50, 80, 25, 0, 48, {1, 3, 10, 30, 100, 300, 1000}, 2000};
  return {100, 4, 20, 20, 60, 20, 0, 24, {1, 3, 10, 30, 100, 300}, 1000};
}

nlohmann::json preset(const std::string& name) { return preset_settings(name); }

RangeTable ranges() {
  RangeTable t;
  t.keys = {{"subjects", 1, 2000},     {"relations", 1, 64},   {"forget", 0, 10000},
            {"edits", 0, 10000},       {"members", 2, 10000},  {"erased", 1, 9999},
            {"never_seen", 0, 100000}, {"max_hours", 1, 1000}, {"pg_steps", 1, 100000, false, 0, 16},
            {"bootstrap", 1, 100000}};
  t.relations = [](const std::string& id, const nlohmann::json& s) {
    if (s["erased"].get<int>() >= s["members"].get<int>())
      bad(id + ".erased", "< members (" + s["members"].dump() + ")", s["erased"]);
    const long facts = s["subjects"].get<long>() * s["relations"].get<long>();
    if (facts > 20000)
      bad(id + ".subjects", "such that subjects x relations <= 20000 facts (relations " +
                                s["relations"].dump() + ")",
          s["subjects"]);
  };
  return t;
}

}  // namespace svattn::experiments::e7_applications
